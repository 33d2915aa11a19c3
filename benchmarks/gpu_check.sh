#!/usr/bin/env bash
# The checks that need a GPU, as one run on a CUDA machine without network access: the benchmark tables on the GPU
# (written as Markdown pages, benchmarks/report.py) and then the whole test suite with CUDA present (its `cuda`
# cases run; every other test must pass there too). Everything lands in $OUT (default: gpu-results/).
#
#     bash benchmarks/gpu_check.sh            # SUITE_SECONDS=330 BENCH_SECONDS=150 by default
#
# Packages the machine lacks can travel as wheels in .whl/ (pip download --python-version 3.12 --only-binary ...);
# they are installed into /tmp/site, ahead of the machine's own.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
{
    nvidia-smi -L
    python3 -c "import sys, torch, transformers, datasets, tokenizers, pyarrow, huggingface_hub as h; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'datasets', datasets.__version__, 'tokenizers', tokenizers.__version__, 'pyarrow', pyarrow.__version__, 'hub', h.__version__)"
    nproc
} 2>&1 | tee "$out/device.txt"

bench=${BENCH_SECONDS:-150}
# GPT-2 small's shape: at d 256 a GPU step is launch-bound and says little.
timeout "$bench" python3 benchmarks/train_step.py --device cuda --size paper --batch-size 16 --length 256 \
    --markdown "$out/train_step_cuda.md" > "$out/train_step.log" 2>&1
echo "train_step: exit $?" | tee -a "$out/device.txt"
timeout "$bench" python3 benchmarks/beam_search.py --device cuda --beams 10 30 100 --reencode-up-to 10 \
    --markdown "$out/beam_search_cuda.md" > "$out/beam_search.log" 2>&1
echo "beam_search: exit $?" | tee -a "$out/device.txt"

# The suite: tests balanced one by one over most of the cores (a module's fixtures are then built in each worker
# that runs it, which the cores pay for), every duration listed.
timeout "${SUITE_SECONDS:-330}" python3 -m pytest -n 14 --dist load -p no:cacheprovider --durations=0 \
    > "$out/suite.log" 2>&1
echo "suite: exit $?" | tee -a "$out/device.txt"
grep -E "passed|failed|error" "$out/suite.log" | tail -3
grep -E "^(FAILED|ERROR)" "$out/suite.log" | head -40
