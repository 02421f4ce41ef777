// Helpers the verbs share for their flags and output files (see commands.h).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "app/cli/commands.h"
#include "engine/io/durable_file.h"

namespace hh::cli {

CLI::Validator finiteNumber(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || (positive && !(value > 0)))
          return std::string("must be a ") + (positive ? "positive " : "") + "finite number, got " + text;
        return {};
      },
      positive ? "POSITIVE" : "FINITE");
}

void refuseOutputInside(const std::string& output, const char* flag, const std::string& folder) {
  if (output.empty() || folder.empty()) return;
  std::error_code ec;
  const auto out = std::filesystem::weakly_canonical(output, ec);
  const auto dir = std::filesystem::weakly_canonical(folder, ec);
  if (ec) return;
  const auto rel = out.lexically_relative(dir);
  if (!rel.empty() && *rel.begin() != "..")
    throw std::invalid_argument(output + ": " + flag + " would write inside the model folder " + folder +
                                " (its own files would be replaced); choose a path outside it");
}

void writeOutput(const std::string& path, const std::string& text, const char* what) {
  try {
    io::writeFileAtomically(path, text);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": cannot write the " + what + " (" + e.what() + ")");
  }
}

void PlanFlags::addTo(CLI::App* command) {
  command->add_option("--feature-map", featureMap, "hedgehog | hedgehog_softmax | t2r | ... (default hedgehog)");
  command->add_option("--rule", rule, "additive | gated | delta | decay | decay_mao | delta_mao (default additive)");
  command->add_option("--layers", layers, "Layers to convert (default: all)")->delimiter(',');
  command->add_option("--window", window,
                      "hedgehog_window: softmax over the last W keys, the map before them (0 = none)");
  command
      ->add_option("--plan", plan,
                   "One attention per layer, e.g. softmax,hedgehog_window(16),hedgehog (replaces the four flags above)")
      ->delimiter(',');
}

void TrainingFlags::addTo(CLI::App* command, const char* stepsHelp) {
  command->add_option("--steps", steps, stepsHelp);
  command->add_option("--batch-size", batch, "Sequences per step");
  command->add_option("--seq-len", seqLen, "Tokens per sequence");
  command->add_option("--max-train", maxTrain, "Use at most this many training sequences");
  command->add_option("--eval-every", evalEvery, "Steps between evaluations (and checkpoints)");
  command->add_option("--lr", lr, "AdamW (peak) learning rate")->check(finiteNumber());
  command->add_option("--corpus", corpus, "Text: brown, or a .txt/.jsonl file or folder of .txt");
  command->add_flag("--resume", resume, "Continue from the checkpoint in --run-dir");
}

}  // namespace hh::cli
