// The bad-input catalogue: malformed checkpoints, configs, tokenizers, datasets, project files,
// run files and failing exports, each built by breaking one thing in a copy of a real fixture.
// Shared by the CLI suite (tests/app/cli/test_bad_inputs_cli.cpp: every entry must fail with one
// line "hedgehog: error: ..." naming `file`, exit status 1) and the workbench's dialog tests.
// No Qt; links hedgehog_engine (run files are written with the engine's RunWriter).
#pragma once
#include <string>
#include <vector>

namespace hh::test {

enum class GuiOpen { ModelFolder, Project, ConvertProject, RunFile, ExportWeights };

struct BadInput {
  std::string id;                 // "checkpoint.truncated", "config.deep_json", ... (unique, stable)
  std::string category;           // checkpoint | config | tokenizer | dataset | project | run | export
  std::string description;        // one line for the docs table: what is wrong with the input
  std::string file;               // absolute path of the file/folder the error must name
  std::vector<std::string> cli;   // the `hedgehog` arguments that a user would run on it
  GuiOpen gui;                    // how the workbench meets it:
                                  //   ModelFolder: File > Open model folder on `guiPath`
                                  //   Project: File > Open project on `guiPath` (a project json)
                                  //   ConvertProject: Run > Convert a project on `guiPath` (the job fails)
                                  //   RunFile: Run > Open a run file on `guiPath`
                                  //   ExportWeights: load model folder `guiPath`, export weights to `exportTo`
  std::string guiPath;
  std::string exportTo;           // ExportWeights only
  std::vector<std::string> preserved;  // files that exist before the attempt and must be byte-identical after
  long fileSizeLimitBytes = 0;    // >0: run with RLIMIT_FSIZE set to this (the "full disk" cases)
  bool needsUnprivileged = false; // permission cases: root must drop to uid/gid 65534 (setpriv) to see them
};

// Creates every bad input under `dir` (which exists and is empty) and returns the catalogue.
std::vector<BadInput> buildBadInputs(const std::string& dir);
// Byte checksums of `preserved` (for before/after comparison).
std::vector<std::string> fingerprints(const std::vector<std::string>& files);

}  // namespace hh::test
