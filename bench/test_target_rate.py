#!/usr/bin/env python3
"""Unit tests of bench/target_rate.py's search and its verdict on one run (BenchScripts.TargetRate
in bench/CMakeLists.txt); no device needed."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import target_rate  # noqa: E402


def holds_below(limit, calls):
    def holds(rate):
        calls.append(rate)
        return rate <= limit
    return holds


class Search(unittest.TestCase):
    def test_rises_then_bisects_towards_the_limit(self):
        calls = []
        best, probed = target_rate.search(holds_below(3000, calls), 1000, 2, 1e9, 4)
        self.assertEqual(probed, calls)
        self.assertEqual(probed[:3], [1000, 2000, 4000])  # 4000 is the first to fail
        self.assertEqual(len(probed), 3 + 4)
        self.assertLessEqual(best, 3000)
        self.assertGreater(best, 2000)  # the bisections moved it up from the last rise
        self.assertTrue(all(r <= 3000 for r in probed if r <= best))

    def test_falls_from_a_start_that_fails_then_bisects(self):
        best, probed = target_rate.search(holds_below(300, []), 1000, 2, 1e9, 2)
        self.assertEqual(probed[:4], [1000, 500, 250, 250 * 2 ** 0.5])  # falls to 250, then bisects
        self.assertEqual(len(probed), 3 + 2)
        self.assertAlmostEqual(best, (250 * (250 * 500) ** 0.5) ** 0.5)  # 353.6 failed, 297.3 held

    def test_no_rate_when_even_the_lowest_fails(self):
        best, probed = target_rate.search(holds_below(10, []), 1000, 2, 1e9, 3, min_rate=100)
        self.assertIsNone(best)
        self.assertEqual(probed, [1000, 500, 250, 125, 100])  # the last step is the floor itself

    def test_stops_at_the_cap_when_everything_holds(self):
        best, probed = target_rate.search(holds_below(1e12, []), 1000, 3, 5000, 3)
        self.assertEqual(best, 5000)
        self.assertEqual(probed, [1000, 3000, 5000])

    def test_without_refinement_the_last_rise_that_held(self):
        best, _ = target_rate.search(holds_below(3000, []), 1000, 2, 1e9, 0)
        self.assertEqual(best, 2000)

    def test_bad_arguments_are_refused(self):
        for args in ((0, 2, 10, 1), (10, 1, 100, 1), (10, 2, 5, 1), (10, 2, 100, -1), (10, 2, 100, 1, 20)):
            with self.assertRaises(ValueError):
                target_rate.search(holds_below(1, []), *args)


def runs(*results):
    """run_once() giving `results` in turn, and the list of those it gave."""
    given = []

    def run_once():
        given.append(results[len(given)])
        return given[-1]
    return run_once, given


class DecideRate(unittest.TestCase):
    def test_repeat_runs_all_and_needs_every_one(self):
        once, given = runs(True, False, True)
        self.assertFalse(target_rate.decide_rate(once, repeat=3))
        self.assertEqual(len(given), 3)
        once, given = runs(True, True)
        self.assertTrue(target_rate.decide_rate(once, repeat=2))

    def test_majority_stops_once_decided(self):
        for results, verdict, ran in (((True, True), True, 2), ((False, False), False, 2),
                                      ((False, True, True), True, 3), ((True, False, False), False, 3),
                                      ((False, True, False, True, True), True, 5)):
            with self.subTest(results=results):
                once, given = runs(*results)
                k = 5 if len(results) == 5 else 3
                self.assertEqual(target_rate.decide_rate(once, majority_of=k), verdict)
                self.assertEqual(len(given), ran)

    def test_one_run_by_default(self):
        once, given = runs(False)
        self.assertFalse(target_rate.decide_rate(once))
        self.assertEqual(len(given), 1)

    def test_bad_arguments_are_refused(self):
        for kw in (dict(repeat=0), dict(majority_of=2), dict(majority_of=0), dict(repeat=2, majority_of=3)):
            with self.subTest(**kw), self.assertRaises(ValueError):
                target_rate.decide_rate(lambda: True, **kw)


def record(p99=400, served=1000, offered=1000, ok=100, requests=100, verified=True, lost=0):
    return {"latency_us": {"all": {"p99": p99}}, "completed_per_s": served, "offered_rate": offered,
            "ok": ok, "requests": requests, "verified": verified, "lost": lost}


class Held(unittest.TestCase):
    def test_a_run_within_the_target_holds(self):
        self.assertTrue(target_rate.held(record(), 500))
        self.assertTrue(target_rate.held(record(p99=500, served=950), 500))

    def test_each_failure_alone_breaks_it(self):
        for bad in (dict(p99=501), dict(served=949), dict(ok=99), dict(verified=False), dict(lost=1)):
            with self.subTest(**bad):
                self.assertFalse(target_rate.held(record(**bad), 500))


if __name__ == "__main__":
    unittest.main()
