#!/usr/bin/env bash
# The checks that need a GPU, as one run of at most 8 minutes on a CUDA machine without network access. Each part
# has its own time budget, so that one slow part cannot starve the others, and writes its Markdown table
# (benchmarks/report.py) as its rows come, so that a part stopped at its budget keeps what it measured:
#
#   train      training tokens/s and peak memory at GPT-2 small's shape (d 768, 12 layers, T' 512), bf16 autocast,
#              every family beside GPT-2 (train_step.py)
#   search     word-synchronous beam search of a GPT-2-small-shaped TG: beams 10, 100, 300 on 20-word sentences, 1,
#              5 and 64 sentences per search, beside paper 003's Table 3 (beam_search.py)
#   blimp      BLiMP as `hf-slm eval blimp` scores it at beam 100: sentences/s and the hours all 67,000 pairs take
#   proposals  a proposal parser drawing J = 300 trees per 20-word sentence, and an LM scoring them (parsers.py)
#   suite      the test suite's CUDA cases (SUITE=all: the whole suite)
#
#     bash benchmarks/gpu_check.sh              # tables and logs in $OUT (default gpu-results/)
#     bash benchmarks/gpu_check.sh --dry-run    # the same parts on the CPU at tiny sizes (the suite runs it)
#
# The budgets (seconds; each part's variable overrides it): TRAIN_SECONDS=120 SEARCH_SECONDS=110 BLIMP_SECONDS=60
# PROPOSAL_SECONDS=70 SUITE_SECONDS=90, 450 in all, sized from a dry run and from the H200 run of 2026-11-27 (the
# setup takes about 20 more). $OUT/device.txt names the machine and says how each part ended (exit 124: its budget
# ran out). Packages the machine lacks travel as wheels in .whl/ (pip download --python-version 3.12 --only-binary
# ...); they are installed into /tmp/site, ahead of the machine's own.
set -uo pipefail
cd "$(dirname "$0")/.."
dry_run=0
if [ "${1:-}" = "--dry-run" ]; then
    dry_run=1
elif [ $# -gt 0 ]; then
    echo "usage: bash benchmarks/gpu_check.sh [--dry-run]" >&2
    exit 2
fi
out=${OUT:-gpu-results}
mkdir -p "$out"
status="$out/device.txt"
: > "$status"

if [ $dry_run = 0 ]; then
    if [ -d .whl ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl || exit 1
        export PYTHONPATH=/tmp/site
    fi
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 \
        || { cat "$out/install.log"; exit 1; }
    nvidia-smi -L 2>&1 | tee -a "$status"
fi
{
    python3 -c "import sys, torch, transformers, datasets, tokenizers, pyarrow, huggingface_hub as h; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'datasets', datasets.__version__, 'tokenizers', tokenizers.__version__, 'pyarrow', pyarrow.__version__, 'hub', h.__version__)"
    nproc
} 2>&1 | tee -a "$status"

# part NAME SECONDS COMMAND...: COMMAND under its budget, its output in $OUT/NAME.log; how it ended in device.txt.
part() {
    local name=$1 budget=$2
    shift 2
    local started=$SECONDS
    timeout "$budget" "$@" > "$out/$name.log" 2>&1
    local code=$?
    echo "$name: exit $code after $((SECONDS - started)) s of its $budget" | tee -a "$status"
    [ $code = 0 ] || tail -5 "$out/$name.log"
}

families=(tg choe_charniak terminals dtg nb-dn-in-m nb-dn-ex-m som)
dry=()  # --dry-run: each script at tiny sizes on the CPU, measuring nothing
[ $dry_run = 1 ] && dry=(--dry-run)
# Each script's --budget stops it starting a row that cannot finish; the margin is its page and its imports.
train=${TRAIN_SECONDS:-120}
part train "$train" python3 benchmarks/train_step.py --device cuda --size paper --length 512 --batch-size 8 \
    --dtype bf16 --steps 3 --only "${families[@]}" --budget $((train - 20)) --markdown "$out/train_step_cuda.md" \
    "${dry[@]}"
search=${SEARCH_SECONDS:-110}
part search "$search" python3 benchmarks/beam_search.py --device cuda --size paper --dtype bf16 --beams 10 100 300 \
    --per-search 1 5 64 --reencode-up-to 0 --tables search --budget $((search - 30)) \
    --markdown "$out/beam_search_cuda.md" "${dry[@]}"
blimp=${BLIMP_SECONDS:-60}
part blimp "$blimp" python3 benchmarks/beam_search.py --device cuda --size paper --dtype bf16 --tables blimp \
    --blimp-batch 64 --budget $((blimp - 25)) --markdown "$out/blimp_cuda.md" "${dry[@]}"
part proposals "${PROPOSAL_SECONDS:-70}" python3 benchmarks/parsers.py --device cuda --rows crf --train-seconds 15 \
    --num 300 --sentences 8 --lm-batch-sizes 32 --repeats 1 --markdown "$out/proposals_cuda.md" "${dry[@]}"
if [ $dry_run = 1 ]; then
    # The suite's CUDA cases exist and are selected: collected only (the suite runs this), from the files that name
    # CUDA (collecting all of them costs the suite a quarter of a minute more)
    mapfile -t cuda_files < <(grep -l cuda tests/test_*.py)
    part suite "${SUITE_SECONDS:-90}" python3 -m pytest --collect-only -q -p no:cacheprovider -k cuda "${cuda_files[@]}"
    exit 0
fi
selection=(-k cuda)
[ "${SUITE:-cuda}" = all ] && selection=()
part suite "${SUITE_SECONDS:-90}" python3 -m pytest -n 14 --dist load -p no:cacheprovider --durations=20 \
    "${selection[@]}"
grep -E "passed|failed|error" "$out/suite.log" | tail -3
grep -E "^(FAILED|ERROR)" "$out/suite.log" | head -40
