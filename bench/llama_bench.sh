#!/usr/bin/env bash
# llama_bench.sh — llama.cpp's `llama-bench` beside `veloxquant generate` on the same GGUF,
# threads and depths; medians of REPS runs; one Markdown table on stdout and a JSON file
# (docs/BENCHMARK.md, "llama.cpp beside veloxquant").
#
# llama-bench is built on demand (never by `make` or the tests) from the llama.cpp source that
# llama-cpp-python 0.3.36 vendors, the version the golden files and scripts/llamacpp_ppl.py use:
# `pip download --no-binary :all:` fetches its sdist, cmake builds only the llama-bench target
# (Release, GGML_NATIVE=ON, no curl / OpenSSL, static), niced, with $JOBS jobs; the sdist and the
# build are cached under $LLAMA_CACHE. AMX: the native build compiles ggml's AMX kernels, whose
# tile instructions SIGILL on this project's Xeon VM; as for the golden files
# (tests/golden/README.md) llama-bench runs with scripts/golden/noamx.c in LD_PRELOAD, which
# refuses ggml's AMX permission request so that it uses its AVX-512 kernels.
#
# What is timed (the same on both sides, DEPTH d, PREFILL p, GEN g):
#   prefill: p tokens evaluated in one batch after d tokens already in the cache (untimed):
#            llama-bench `-p p -d d`; veloxquant `generate --prompt-tokens d+p --depth d -n 0`
#   peak RSS: GNU time's maximum resident set of each process (llama-bench: its prefill and
#            decode tests; veloxquant: the larger of its two runs), the largest over the rounds
#   decode:  g single-token steps after d tokens in the cache: llama-bench `-n g -d d`;
#            veloxquant `generate --prompt-tokens max(d,1) -n g+1` (g evaluated steps), with
#            --timings: the attention's share of a step (append + attend, ms per token) is
#            recorded too, and the step's bytes (the weights it reads whole + the KV cache)
#            give each cache's byte bound against our fp16: the ratio if both steps streamed
#            their bytes at one rate
# llama-bench feeds random token ids; veloxquant reads data/corpus_en.txt and decodes greedily.
# LLAMA_FILL=state: llama.cpp's cells at depth > 0 run bench/llama_depth.c instead, the same two
# tests on a cache restored from a state of 512 evaluated tokens repeated up to the depth (what
# llama-bench restores before its repetitions after evaluating the depth once); our side always
# evaluates its depth (VQ_FILL=once: once per cell, one run whose prefill follows DEPTH-PREFILL
# tokens and whose decode starts at DEPTH).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<EOF
usage: bench/llama_bench.sh [--build-only] [--out FILE.json] [--vq PATH]

Builds llama.cpp's llama-bench (first run only, then cached; about half an hour on 2 busy
cores), then times prefill and decode of llama.cpp and of veloxquant at each depth and thread
count and prints one Markdown table (medians of REPS runs, ratios against llama.cpp's f16
cache and against our fp16 cache of the same run); the same rows go to a JSON file.

  --build-only    build (or find) llama-bench and print its path, measure nothing
  --out FILE      JSON output (default: bench/results/llama_bench.json)
  --vq PATH       the veloxquant binary (default: build/veloxquant)
  -h, --help      this text

Environment (defaults in brackets):
  MODEL      GGUF file [\$VQ_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf, else the same file in
             ~/.cache/veloxquant/models]
  DEPTHS     tokens already in the cache [0 512 2048 4096 8192]
  THREADS    thread counts [1 2]
  KVS        veloxquant caches: fp16 and --kv presets; empty: llama.cpp only
             [fp16 kv8 kv5 kv4 kv3 kv2]
  LLAMA_KVS  llama.cpp caches: f16 (flash attention off), f16-fa, q8_0, q4_0, q5_0, q5_1,
             q4_1, iq4_nl (quantized ones with flash attention on); empty: veloxquant
             only, nothing built [f16 f16-fa q8_0 q4_0]
  REPS       timed runs per cell; medians are reported [3]
  PREFILL    prompt tokens of the prefill test [512]
  GEN        decode steps of the decode test [128]
  CORPUS     prompt text of the veloxquant runs [data/corpus_en.txt]
  LLAMA_FILL llama.cpp's depth: eval (llama-bench evaluates it once per run) or state
             (bench/llama_depth.c: 512 evaluated tokens repeated up to the depth and
             restored, as llama-bench restores its own fill; for depths whose fill takes
             hours) [eval]
  VQ_FILL    veloxquant's depth: each (its prefill and decode tests each evaluate it) or
             once (one run: the prefill of PREFILL tokens after DEPTH-PREFILL, then GEN
             steps at DEPTH; every depth >= PREFILL) [each]
  LLAMA_CACHE  llama.cpp's sdist and build [~/.cache/veloxquant/llama.cpp-$LLAMA_CPP_PYTHON_VERSION]
  JOBS       build jobs [2]
Short run: DEPTHS="0 512" THREADS=1 KVS="fp16 kv4" LLAMA_KVS="f16 q4_0" REPS=1 $0
Leave OMP_WAIT_POLICY unset: OpenMP's default spins briefly, then sleeps; =passive sleeps at
once and makes veloxquant's decode on 2 threads several times slower (generate warns).
EOF
}

die() {
    echo "llama_bench: $*" >&2
    exit 1
}

BUILD_ONLY=0
OUT="$ROOT/bench/results/llama_bench.json"
VQ="$ROOT/build/veloxquant"
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --build-only) BUILD_ONLY=1 ;;
    --out) [ $# -ge 2 ] || die "--out needs a file"; OUT="$2"; shift ;;
    --vq) [ $# -ge 2 ] || die "--vq needs a path"; VQ="$2"; shift ;;
    *) echo "llama_bench: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

MODEL="${MODEL:-${VQ_MODELS:-$HOME/.cache/veloxquant/models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
DEPTHS="${DEPTHS:-0 512 2048 4096 8192}"
THREADS="${THREADS:-1 2}"
KVS="${KVS-fp16 kv8 kv5 kv4 kv3 kv2}"           # set but empty: llama.cpp only
LLAMA_KVS="${LLAMA_KVS-f16 f16-fa q8_0 q4_0}" # set but empty: veloxquant only
REPS="${REPS:-3}"
PREFILL="${PREFILL:-512}"
GEN="${GEN:-128}"
CORPUS="${CORPUS:-$ROOT/data/corpus_en.txt}"
LLAMA_CACHE="${LLAMA_CACHE:-$HOME/.cache/veloxquant/llama.cpp-$LLAMA_CPP_PYTHON_VERSION}"
JOBS="${JOBS:-2}"
LLAMA_FILL="${LLAMA_FILL:-eval}"
VQ_FILL="${VQ_FILL:-each}"

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in $DEPTHS; do is_uint "$v" || die "DEPTHS: '$v' is not a token count"; done
is_pos() { is_uint "$1" && [ "$1" -ge 1 ]; }
for v in $THREADS; do is_pos "$v" || die "THREADS: '$v' is not an integer >= 1"; done
for v in REPS PREFILL GEN; do is_pos "${!v}" || die "$v: '${!v}' is not an integer >= 1"; done
for v in $KVS; do
    case "$v" in
    fp16 | kv8 | kv5 | kv4 | kv3 | kv2) ;;
    *) die "KVS: '$v' is not fp16 or a --kv preset (kv8 kv5 kv4 kv3 kv2)" ;;
    esac
done
for v in $LLAMA_KVS; do
    case "$v" in
    f16 | f16-fa | q8_0 | q5_0 | q5_1 | q4_0 | q4_1 | iq4_nl) ;;
    *) die "LLAMA_KVS: '$v' is not one of f16 f16-fa q8_0 q5_0 q5_1 q4_0 q4_1 iq4_nl" ;;
    esac
done
case "$LLAMA_FILL" in
eval | state) ;;
*) die "LLAMA_FILL: '$LLAMA_FILL' is not eval or state" ;;
esac
case "$VQ_FILL" in
each | once) ;;
*) die "VQ_FILL: '$VQ_FILL' is not each or once" ;;
esac
if [ "$VQ_FILL" = once ]; then
    for v in $DEPTHS; do [ "$v" -ge "$PREFILL" ] || die "VQ_FILL=once: depth $v < PREFILL"; done
fi
if [ -z "$DEPTHS" ] || [ -z "$THREADS" ] || [ -z "$KVS$LLAMA_KVS" ]; then
    die "DEPTHS, THREADS and KVS or LLAMA_KVS must not be empty"
fi

# ---- llama-bench: sdist -> vendor/llama.cpp -> cmake --target llama-bench (cached)
SRC="$LLAMA_CACHE/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
LB="$LLAMA_CACHE/build/bin/llama-bench"
LD="$LLAMA_CACHE/build/bin/llama_depth" # bench/llama_depth.c, linked against the same build
NOAMX="$LLAMA_CACHE/noamx.so"
build_llama_bench() {
    mkdir -p "$LLAMA_CACHE/src"
    exec 9> "$LLAMA_CACHE/build.lock" # one build at a time; a second run waits, then reuses it
    flock 9
    [ -x "$LB" ] && return 0
    local sdist="$LLAMA_CACHE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
    if [ ! -f "$sdist" ]; then
        echo "llama_bench: downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist" >&2
        python3 -m pip download --no-binary :all: --no-deps \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$LLAMA_CACHE" >&2 ||
            die "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed (network?)"
        [ -f "$sdist" ] || die "pip download left no $sdist"
    fi
    if [ ! -f "$SRC/CMakeLists.txt" ]; then
        tar xzf "$sdist" -C "$LLAMA_CACHE/src" || die "cannot unpack $sdist"
        [ -f "$SRC/CMakeLists.txt" ] || die "$sdist has no vendor/llama.cpp"
    fi
    command -v cmake > /dev/null || die "cmake missing (scripts/install_deps.sh)"
    echo "llama_bench: building llama-bench in $LLAMA_CACHE/build (log: build.log)" >&2
    {
        nice cmake -S "$SRC" -B "$LLAMA_CACHE/build" -DCMAKE_BUILD_TYPE=Release \
            -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
            -DLLAMA_BUILD_APP=OFF &&
            nice cmake --build "$LLAMA_CACHE/build" -j "$JOBS" --target llama-bench
    } > "$LLAMA_CACHE/build.log" 2>&1 || die "build failed, see $LLAMA_CACHE/build.log"
    [ -x "$LB" ] || die "the build made no $LB"
    exec 9>&-
}
if [ -n "$LLAMA_KVS" ] || [ "$BUILD_ONLY" = 1 ]; then # LLAMA_KVS="": veloxquant only
    [ -x "$LB" ] || build_llama_bench
    if [ ! -f "$NOAMX" ] || [ "$ROOT/scripts/golden/noamx.c" -nt "$NOAMX" ]; then
        gcc -shared -fPIC -O2 "$ROOT/scripts/golden/noamx.c" -o "$NOAMX" -ldl ||
            die "cannot build $NOAMX"
    fi
    if [ "$LLAMA_FILL" = state ] &&
        { [ ! -x "$LD" ] || [ "$ROOT/bench/llama_depth.c" -nt "$LD" ]; }; then
        b="$LLAMA_CACHE/build"
        gcc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$SRC/include" -I"$SRC/ggml/include" \
            -c "$ROOT/bench/llama_depth.c" -o "$LD.o" &&
            g++ -o "$LD" "$LD.o" "$b/common/libllama-common-base.a" "$b/src/libllama.a" \
                "$b/ggml/src/libggml.a" "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/libggml-base.a" \
                -ldl -lm -fopenmp -lpthread || die "cannot build $LD"
    fi
fi
if [ "$BUILD_ONLY" = 1 ]; then
    echo "$LB"
    exit 0
fi

[ -r "$MODEL" ] || die "model $MODEL missing (scripts/fetch_models.sh)"
[ -x "$VQ" ] || die "$VQ missing (build veloxquant first: make)"
[ -r "$CORPUS" ] || die "$CORPUS missing (make bench-data)"
mkdir -p "$(dirname "$OUT")" || die "cannot create the folder of $OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the commit measured: HEAD when the runs start (a commit made while they run must not be
# recorded), "+dirty" when the sources differ from it
LB_VQ_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain -- src include tools CMakeLists.txt 2>&1)" ]; then
    LB_VQ_COMMIT="$LB_VQ_COMMIT+dirty"
fi

# ---- both engines: per depth and thread count, REPS rounds; each round runs every llama.cpp
# cache (one llama-bench run, -r 1) and every veloxquant cache, so that load changes on a shared
# machine hit both engines alike
LB_VERSION=""
if [ -n "$LLAMA_KVS" ]; then # "version: 0.5.0-dev (build 1, ...)" -> 0.5.0-dev
    LB_VERSION=$(LD_PRELOAD="$NOAMX" "$LB" --version 2>&1 |
        sed -n 's/^version: *\([^ ]*\).*/\1/p' | head -1)
fi
run_llama() { # $1 cache, $2 depth, $3 threads, $4 output file
    local type=${1%-fa} fa=on
    [ "$1" = f16 ] && fa=off # f16: llama.cpp's default; a quantized V needs flash attention
    local prog=("$LB" -o json) # LLAMA_FILL=state: the depth restored by llama_depth
    [ "$LLAMA_FILL" = state ] && [ "$2" -gt 0 ] && prog=("$LD")
    LD_PRELOAD="$NOAMX${LD_PRELOAD:+ $LD_PRELOAD}" /usr/bin/time -f %M -o "$4.rss" \
        "${prog[@]}" -m "$MODEL" -p "$PREFILL" -n "$GEN" \
        -d "$2" -t "$3" -ctk "$type" -ctv "$type" -fa "$fa" -r 1 > "$4" 2> "$4.err" ||
        { cat "$4.err" >&2; die "${prog[0]##*/} failed ($1, depth $2, $3 threads)"; }
}
prompt_file() { # $1 tokens -> a file of the corpus' first bytes, ~6 bytes per token
    local f="$tmp/prompt-$1.txt"
    [ -f "$f" ] || head -c $((($1 + 64) * 6)) "$CORPUS" > "$f"
    echo "$f"
}
run_vq() { # $1 cache, $2 depth, $3 threads, $4 output prefix (.pp, .tg)
    local args=(--kv "$1") np=$(($2 > 0 ? $2 : 1))
    [ "$1" = fp16 ] && args=(--method fp16)
    if [ "$VQ_FILL" = once ]; then # both tests from one run, one fill
        /usr/bin/time -f %M -o "$4.pp.rss" \
            "$VQ" generate -m "$MODEL" -f "$(prompt_file "$2")" -t "$3" --prompt-tokens "$2" \
            --depth $(($2 - PREFILL)) -n $((GEN + 1)) -c $(($2 + GEN + 1)) "${args[@]}" \
            --timings --json > "$4.pp" 2> "$4.err" ||
            { cat "$4.err" >&2; die "veloxquant generate failed ($1, depth $2)"; }
        cp "$4.pp" "$4.tg" && cp "$4.pp.rss" "$4.tg.rss"
        return
    fi
    /usr/bin/time -f %M -o "$4.pp.rss" \
        "$VQ" generate -m "$MODEL" -f "$(prompt_file $(($2 + PREFILL)))" -t "$3" \
        --prompt-tokens $(($2 + PREFILL)) --depth "$2" -n 0 -c $(($2 + PREFILL + 1)) \
        "${args[@]}" --json > "$4.pp" 2> "$4.err" ||
        { cat "$4.err" >&2; die "veloxquant generate failed (prefill, $1, depth $2)"; }
    /usr/bin/time -f %M -o "$4.tg.rss" \
        "$VQ" generate -m "$MODEL" -f "$(prompt_file "$np")" -t "$3" --prompt-tokens "$np" \
        -n $((GEN + 1)) -c $((np + GEN + 1)) "${args[@]}" --timings --json > "$4.tg" 2> "$4.err" ||
        { cat "$4.err" >&2; die "veloxquant generate failed (decode, $1, depth $2)"; }
}
for d in $DEPTHS; do
    for t in $THREADS; do
        for r in $(seq "$REPS"); do
            echo "llama_bench: depth $d, $t thread(s), round $r of $REPS" >&2
            for kv in $LLAMA_KVS; do run_llama "$kv" "$d" "$t" "$tmp/llama-$kv-$d-$t-$r.json"; done
            for kv in $KVS; do run_vq "$kv" "$d" "$t" "$tmp/vq-$kv-$d-$t-$r"; done
        done
    done
done

export DEPTHS THREADS KVS LLAMA_KVS REPS PREFILL GEN MODEL LLAMA_CPP_PYTHON_VERSION LLAMA_FILL \
    VQ_FILL
# the CPU and the kernel variant ours ran, as the library reports them (veloxquant version -v)
LB_CPU=$("$VQ" version --verbose | sed -n 's/^cpu: //p')
export LB_CPU LB_VQ_COMMIT LB_VERSION
python3 - "$tmp" "$OUT" <<'PY'
import datetime, json, os, statistics, sys
tmp, out = sys.argv[1], sys.argv[2]
E = os.environ
depths = [int(x) for x in E["DEPTHS"].split()]
threads = [int(x) for x in E["THREADS"].split()]
kvs, lkvs = E["KVS"].split(), E["LLAMA_KVS"].split()
reps, prefill, gen = int(E["REPS"]), int(E["PREFILL"]), int(E["GEN"])
lcp = E["LLAMA_CPP_PYTHON_VERSION"]
cells = {}  # (depth, threads, engine, kv) -> {"pp": [tok/s], "tg": [tok/s]}
commit = build = None


def rss_mb(path):  # GNU time's %M: the peak resident set in KiB (last line of its file)
    with open(path) as f:
        return int(f.read().split()[-1]) / 1024.0


for d in depths:
    for th in threads:
        for kv in lkvs:
            c = cells.setdefault((d, th, "llama.cpp", kv), {"pp": [], "tg": []})
            for r in range(1, reps + 1):
                for t in json.load(open(os.path.join(tmp, "llama-%s-%d-%d-%d.json"
                                                     % (kv, d, th, r)))):
                    assert t["n_depth"] == d and t["n_threads"] == th, t
                    commit, build = t.get("build_commit"), t.get("build_number")
                    n = t["n_prompt"] or t["n_gen"]
                    c["pp" if t["n_prompt"] else "tg"] += [n * 1e9 / ns for ns in t["samples_ns"]]
                c.setdefault("rss", []).append(rss_mb(os.path.join(
                    tmp, "llama-%s-%d-%d-%d.json.rss" % (kv, d, th, r))))
short = []
for d in depths:
    for th in threads:
        for kv in kvs:
            c = cells.setdefault((d, th, "veloxquant", kv), {"pp": [], "tg": [], "attn": []})
            for r in range(1, reps + 1):
                base = os.path.join(tmp, "vq-%s-%d-%d-%d" % (kv, d, th, r))
                pp, tg = json.load(open(base + ".pp")), json.load(open(base + ".tg"))
                once = E["VQ_FILL"] == "once"  # the prefill then ran after d - prefill
                assert pp["depth"] == d - (prefill if once else 0), pp
                assert pp["prefill_tokens"] == prefill, pp
                c["pp"].append(pp["prefill_tok_s"])
                c.setdefault("rss", []).append(max(rss_mb(base + ".pp.rss"),
                                                   rss_mb(base + ".tg.rss")))
                c["tg"].append(tg["decode_tok_s"])
                c["attn"].append(tg["timings"]["decode"]["ms_per_token"]["attention"])
                c["step_bytes"] = tg["step_weight_bytes"] + tg["kv_bytes"]
                c["kv_bytes"] = tg["kv_bytes"]
                if tg["decode_tokens"] < gen:
                    short.append("%s d%d t%d: %d decode steps" % (kv, d, th,
                                                                  tg["decode_tokens"]))


LLAMA_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32, "q4_0": 18 / 32,
               "q4_1": 20 / 32, "iq4_nl": 18 / 32}  # bytes per element of each cache type


def med(xs):
    return statistics.median(xs) if xs else None


rows = []
for d in depths:
    for th in threads:
        def ref(engine, names, which):
            v = [med(cells.get((d, th, engine, k), {}).get(which, [])) for k in names]
            v = [x for x in v if x]
            return max(v) if v else None
        lref = {w: ref("llama.cpp", ["f16", "f16-fa"], w) for w in ("pp", "tg")}
        vref = {w: ref("veloxquant", ["fp16"], w) for w in ("pp", "tg")}
        f16 = cells.get((d, th, "veloxquant", "fp16"), {})
        aref = med(f16.get("attn", []))
        for engine, names in (("llama.cpp", lkvs), ("veloxquant", kvs)):
            for kv in names:
                c = cells.get((d, th, engine, kv), {})
                row = {"depth": d, "threads": th, "engine": engine, "kv": kv}
                for w, name in (("pp", "prefill"), ("tg", "decode")):
                    m = med(c.get(w, []))
                    row[name + "_tok_s"] = m
                    row[name + "_samples"] = c.get(w, [])
                    row[name + "_x_llama_f16"] = m / lref[w] if m and lref[w] else None
                    row[name + "_x_fp16"] = m / vref[w] if m and vref[w] else None
                # decode attention (ms per token, lower is faster) and the byte bound
                a = med(c.get("attn", []))
                row["decode_attn_ms"] = a
                row["decode_attn_samples"] = c.get("attn", [])
                row["decode_attn_x_fp16"] = aref / a if a and aref else None
                row["kv_bytes"] = c.get("kv_bytes")
                if engine == "llama.cpp" and f16.get("kv_bytes"):
                    # the same tokens in llama.cpp's cache types: f16 2 bytes an element,
                    # q8_0 34 and q4_0 18 bytes a block of 32, ...
                    row["kv_bytes"] = round(f16["kv_bytes"] * LLAMA_BYTES[kv.split("-")[0]] / 2)
                row["peak_rss_mb"] = max(c["rss"]) if c.get("rss") else None
                row["step_bytes"] = c.get("step_bytes")
                row["decode_bound_x_fp16"] = (f16["step_bytes"] / c["step_bytes"]
                                              if "step_bytes" in c and "step_bytes" in f16
                                              else None)
                rows.append(row)
meta = {
    "llama_cpp": {"commit": commit, "build_number": build, "version": E["LB_VERSION"],
                  "source": "llama-cpp-python %s sdist, vendor/llama.cpp" % lcp},
    "veloxquant_commit": E["LB_VQ_COMMIT"], "cpu": E["LB_CPU"], "nproc": os.cpu_count(),
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "model": os.path.basename(E["MODEL"]), "depths": depths, "threads": threads, "reps": reps,
    "prefill_tokens": prefill, "decode_tokens": gen,
    "omp_wait_policy": E.get("OMP_WAIT_POLICY"), "llama_fill": E["LLAMA_FILL"],
    "vq_fill": E["VQ_FILL"], "rows": rows,
}
with open(out + ".tmp", "w") as f:
    json.dump(meta, f, indent=1)
os.replace(out + ".tmp", out)


def fmt(x, p=1):
    return "-" if x is None else "%.*f" % (p, x)


who = "llama.cpp %s (llama-bench %s, llama-cpp-python %s's vendored source%s) beside " % (
    commit, E["LB_VERSION"], lcp, "; its depths restored from a state of 512 evaluated tokens "
    "repeated (LLAMA_FILL=state, bench/llama_depth.c)" if E["LLAMA_FILL"] == "state" else "")
print("%sveloxquant %s on %s; %s (%d CPUs), threads %s, %s; prefill of %d tokens and %d decode "
      "steps at each depth, median of %d run(s).\n"
      % (who if lkvs else "", meta["veloxquant_commit"], meta["model"], meta["cpu"],
         meta["nproc"], " ".join(map(str, threads)), meta["date"], prefill, gen, reps))
print("| depth | threads | engine | KV | prefill tok/s | decode tok/s | prefill x llama f16 "
      "| decode x llama f16 | prefill x our fp16 | decode x our fp16 | decode attn ms "
      "| attn x our fp16 | byte bound x fp16 |")
print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["depth"], r["threads"], r["engine"], r["kv"], fmt(r["prefill_tok_s"]),
        fmt(r["decode_tok_s"]), fmt(r["prefill_x_llama_f16"], 2),
        fmt(r["decode_x_llama_f16"], 2), fmt(r["prefill_x_fp16"], 2),
        fmt(r["decode_x_fp16"], 2), fmt(r["decode_attn_ms"], 2),
        fmt(r["decode_attn_x_fp16"], 2), fmt(r["decode_bound_x_fp16"], 2)))
print("\n%s\"x our fp16\": against veloxquant's fp16 cache in this run; \"decode attn ms\": "
      "the attention (KV append + attend) of a decode step, ms per token; \"byte bound\": our "
      "fp16 step's bytes (the weights it reads whole + the KV cache) over this cache's, the decode "
      "ratio if both steps streamed their bytes at one rate." % (
    "\"x llama f16\": against the faster of llama.cpp's f16 caches (flash attention off or on) "
    "in this run; " if lkvs else ""))
for s in short:
    print("note: decode stopped at end-of-generation: " + s, file=sys.stderr)
PY
echo "llama_bench: wrote $OUT" >&2
