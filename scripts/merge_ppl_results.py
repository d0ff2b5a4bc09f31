#!/usr/bin/env python3
"""Merges `veloxquant perplexity --json` outputs with scripts/llamacpp_ppl.py's results.json
into one results.json (schema veloxquant.results.v1, docs/results.schema.json) that
`veloxquant report` turns into table.md and the quality figure.

  python3 scripts/merge_ppl_results.py --llamacpp OUT/llamacpp/results.json [MORE ...] \
      --ours OUT/fp16.json OUT/kv8.json ... --commit abc1234 --threads 1 -o DIR/results.json

Every perplexity JSON and further llama.cpp results.json (configs run into separate folders at
the same time) must share the first llama.cpp run's protocol (text, ctx, chunks). Paths are
written relative (the model by its file name): committed results carry no absolute paths.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llamacpp", nargs="+", required=True,
                    help="results.json files of scripts/llamacpp_ppl.py")
    ap.add_argument("--ours", nargs="+", required=True, help="perplexity --json outputs")
    ap.add_argument("--commit", required=True, help="commit of the veloxquant binary")
    ap.add_argument("--threads", type=int, required=True, help="threads per run")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()

    with open(args.llamacpp[0]) as f:
        doc = json.load(f)
    for path in args.llamacpp[1:]:
        with open(path) as f:
            more = json.load(f)
        if more["protocol"] != doc["protocol"]:
            sys.exit("merge_ppl_results: %s: protocol differs from %s" % (path, args.llamacpp[0]))
        doc["results"] += more["results"]
    doc["model"]["file"] = os.path.basename(doc["model"]["file"])
    doc["git_commit"] = args.commit
    doc["hardware"]["cores"] = args.threads
    m = doc["model"]
    proto = doc["protocol"]
    for path in args.ours:
        with open(path) as f:
            r = json.load(f)
        if (r["text"], r["ctx"], r["chunks"]) != (proto["corpus"], proto["ctx"], proto["chunks"]):
            sys.exit("merge_ppl_results: %s: protocol differs from the llama.cpp run" % path)
        bits = 16.0 / r["fullKV_x"]
        e = {"config": {"name": r["config"], "engine": "veloxquant",
                        "k_method": r["k_method"], "v_method": r["v_method"],
                        "k_bits": r["k_bits"], "v_bits": r["v_bits"], "options": {}},
             "bits_per_elem": round(bits, 4), "kv_bytes": r["kv_bytes"],
             "key_x": r["key_x"], "fullKV_x": r["fullKV_x"], "ppl": r["ppl"]}
        for k in ("kld_mean", "kld_median", "kld_p99", "top1", "prefill_tok_s"):
            if r.get(k) is not None:
                e[k] = r[k]
        doc["results"].append(e)
    doc["model"] = m
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
