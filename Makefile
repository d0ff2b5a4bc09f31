# Thin wrapper over CMake: `make`, `make test`, `make demo`, `make bench`, `make asan`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Models fetched by `make models` (scripts/fetch_models.sh names): the default model and
# Gemma 3 270M, both golden-tested by `make test`.
MODELS ?= smollm2 gemma3-270m

.PHONY: all deps models bench-data venv test test-large test-python test-transformers test-asan \
        test-tsan demo bench \
        install clean results llamacpp-venv \
        fuzz format \
        format-check

all: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/Makefile:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

deps:
	bash scripts/install_deps.sh

models:
	bash scripts/fetch_models.sh $(MODELS)

# English prose for perplexity (data/corpus_en.txt, sha256-pinned) from python3.11-doc.
bench-data:
	python3 scripts/extract_corpus.py

# The tables of docs/RESULTS.md from the committed results files (docs/results/, bench/results/);
# the test repo_results fails when the document and the files disagree.
results:
	python3 scripts/gen_results.py

# Installs packages, fetches the models ($(MODELS)), extracts the corpus, builds, runs the whole
# suite, then the sanitizer builds: gcc with ASan + UBSan, clang with TSan (the threaded tests).
# Tests labelled "large" (test_large_*.c) are left to `make test-large`.
test: deps models bench-data all venv
	cd $(BUILD) && ctest --output-on-failure -j 2 -LE large
	$(MAKE) test-python
	$(MAKE) test-asan
	$(MAKE) test-tsan

# The large-model tests (label "large", not in `make test`): fetches Qwen2.5-Coder 1.5B Instruct
# Q4_K_M (1.1 GB, scripts/fetch_models.sh qwen2.5-1.5b) and runs its golden test against
# llama.cpp (tests/unit/test_large_qwen25.c, a few minutes on 2 threads) and the server tests
# on it (tests/server/test_server_large.py, CTest server_large: the venv's openai client).
test-large: all venv
	bash scripts/fetch_models.sh qwen2.5-1.5b
	cd $(BUILD) && ctest --output-on-failure -L large

# The Python package (python/): a venv in $(BUILD)/venv with NumPy and pytest from PyPI, the
# package installed from python/ with the library just built, then its pytest suite.
# The venv also holds the openai client for the server tests (tests/server/, CTest server_api).
# llama.cpp beside us (scripts/llamacpp_ppl.py, scripts/golden/): llama-cpp-python 0.3.36
# built from source with numpy and gguf in $(BUILD)/llama-venv; not needed by `make test`.
llamacpp-venv:
	LLAMA_VENV=$(abspath $(BUILD))/llama-venv bash scripts/install_llamacpp.sh

VENV = $(abspath $(BUILD))/venv
venv:
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q numpy pytest openai

test-python: all venv
	VQ_LIBRARY=$(abspath $(BUILD))/libveloxquant.so $(VENV)/bin/pip install -q ./python
	VQ_CLI=$(abspath $(BUILD))/veloxquant $(VENV)/bin/pytest -q python/tests

# The transformers integration (veloxquant.transformers, python/tests/test_transformers.py), not in
# `make test`: a venv of its own, $(BUILD)/venv-transformers, with torch and transformers
# (scripts/install_transformers.sh: TORCH=debian, the default, is Debian's CPU-only torch, ~137 MB;
# TORCH=pypi the current PyPI releases, whose Linux torch is the CUDA build, ~5.6 GB), then the
# package with its [transformers] extras and the tests on tiny random Llama and Qwen2 models.
TORCH ?= debian
TF_VENV = $(abspath $(BUILD))/venv-transformers
test-transformers: all
	bash scripts/install_transformers.sh $(TF_VENV) $(TORCH)
	VQ_LIBRARY=$(abspath $(BUILD))/libveloxquant.so $(TF_VENV)/bin/pip install -q "./python[transformers]"
	$(TF_VENV)/bin/pytest -q python/tests/test_transformers.py

# Also the configure without PLplot (VQ_PLPLOT=OFF): every test but the figure ones must pass.
test-asan:
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVQ_SANITIZE=address,undefined -DVQ_OPENMP=OFF -DVQ_BUILD_BENCH=OFF -DVQ_PLPLOT=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && VQ_PYTHON=$(VENV)/bin/python ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 2 -LE model

# libFuzzer targets (clang), the library instrumented too; each runs FUZZ_TIME seconds from the
# seeds in fuzz/corpus/ and reports executions and edges covered (scripts/fuzz.sh).
FUZZ_TIME ?= 60
FUZZ_TARGETS = fuzz_api fuzz_artifact fuzz_codec fuzz_gguf fuzz_tokenizer
fuzz:
	cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DVQ_BUILD_FUZZ=ON -DVQ_BUILD_TESTS=OFF -DVQ_BUILD_BENCH=OFF -DVQ_OPENMP=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	bash scripts/fuzz.sh $(BUILD)-fuzz $(FUZZ_TIME) $(FUZZ_TARGETS)

# The clang build: everything compiled by clang with -fsanitize=thread and LLVM's OpenMP runtime,
# then the tests that run OpenMP regions (label "threads") under ThreadSanitizer. Archer (LLVM's
# OpenMP tool for TSan, in libomp-dev) reports OpenMP's barriers, joins and reductions to TSan;
# without it every parallel region gives false races inside the uninstrumented runtime.
ARCHER ?= $(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so))
test-tsan:
	@test -n "$(ARCHER)" || { echo "test-tsan: libarcher.so missing (libomp-dev)"; exit 1; }
	cmake -S . -B $(BUILD)-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DVQ_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && OMP_TOOL_LIBRARIES=$(ARCHER) ARCHER_OPTIONS=verbose=1 \
	    TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=1" \
	    ctest --output-on-failure -j 2 -L threads

# clang-format (.clang-format: 4 spaces, same-line braces, 100 columns) over every C file: format
# rewrites them in place, format-check changes nothing and fails listing what would change.
# Generated tables (first line says "do not edit") keep their generator's layout.
FORMAT_FILES = $(shell (git ls-files '*.c' '*.h' 2>/dev/null || \
                 find include src tools tests bench fuzz -name '*.[ch]') | \
                 xargs grep -L -m1 'do not edit')
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

demo: deps all
	bash scripts/fetch_models.sh smollm2
	bash scripts/demo.sh $(BUILD)/veloxquant

bench: all
	$(BUILD)/veloxquant bench --method turboquant_mse --bits 4 --seq_lens 1024 8192 --compare_optimized

# PREFIX=/some/prefix installs there (default: CMAKE_INSTALL_PREFIX, /usr/local); DESTDIR works.
PREFIX ?=
install: all
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
