#include "gpu/glsl_compiler.hpp"

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>

#include <mutex>
#include <string>
#include <utility>

#include "gpubatch/error.hpp"

namespace gpubatch::gpu {

extern const std::pair<std::string_view, std::string_view> kEmbeddedGlslText[];
extern const std::size_t kEmbeddedGlslTextCount;

namespace {

// Serves #include "x.glsl" from the embedded shaders/*.glsl.
class EmbeddedIncluder final : public glslang::TShader::Includer {
 public:
  IncludeResult* includeLocal(const char* header, const char*, size_t) override { return find(header); }
  IncludeResult* includeSystem(const char* header, const char*, size_t) override { return find(header); }
  void releaseInclude(IncludeResult* result) override { delete result; }

 private:
  static IncludeResult* find(const char* header) {
    if (auto text = embedded_glsl(header))
      return new IncludeResult(header, text->data(), text->size(), nullptr);
    return nullptr;  // glslang reports "could not process include directive"
  }
};

std::mutex& compiler_mutex() {
  static std::mutex m;
  return m;
}

void initialize_once() {
  static std::once_flag once;
  std::call_once(once, [] { glslang::InitializeProcess(); });
}

// glslang's log ends with a summary line ("N compilation errors. No code generated.") and blank
// lines; keep the diagnostics.
std::string tidy_log(std::string log) {
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ' || log.back() == '\0')) log.pop_back();
  return log;
}

}  // namespace

std::optional<std::string_view> embedded_glsl(std::string_view file) {
  for (std::size_t i = 0; i < kEmbeddedGlslTextCount; ++i)
    if (kEmbeddedGlslText[i].first == file) return kEmbeddedGlslText[i].second;
  return std::nullopt;
}

std::vector<std::uint32_t> compile_compute_glsl(std::string_view source, std::string_view name) {
  initialize_once();
  std::lock_guard lock(compiler_mutex());
  glslang::TShader shader(EShLangCompute);
  const std::string source_name(name);
  const char* text = source.data();
  const int length = static_cast<int>(source.size());
  const char* names = source_name.c_str();
  shader.setStringsWithLengthsAndNames(&text, &length, &names, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_2);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_5);
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  EmbeddedIncluder includer;
  if (!shader.parse(GetDefaultResources(), 460, false, messages, includer))
    throw Error(ErrorCode::compile_failed, "kernel '" + source_name + "' does not compile:\n" +
                                               tidy_log(shader.getInfoLog()));
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages))
    throw Error(ErrorCode::compile_failed, "kernel '" + source_name + "' does not link:\n" +
                                               tidy_log(program.getInfoLog()));
  std::vector<std::uint32_t> spirv;
  spv::SpvBuildLogger logger;
  glslang::SpvOptions options;
  options.disableOptimizer = true;  // the driver optimises; keep compile time low
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), spirv, &logger, &options);
  if (spirv.empty())
    throw Error(ErrorCode::compile_failed, "kernel '" + source_name + "': no SPIR-V generated: " +
                                               logger.getAllMessages());
  return spirv;
}

}  // namespace gpubatch::gpu
