#!/usr/bin/env bash
# Every GPU check in one go, for a short lease on a machine with an NVIDIA GPU.
#
#     bash examples/gpu_checks/run_all.sh            # from the repository root
#
# Runs, each under its own time limit so that one hang cannot eat the others' time:
#   amp_check.py      CUDA AMP fp16 / bf16 with the scaler, the NaN doctor, O2        (issue 4)
#   fsdp_check.py     FSDP2 with NCCL on every GPU (one GPU: world size 1)           (issue 4)
#   monitor_check.py  the memory monitor against nvidia-smi and torch.cuda          (issue 6)
#   compile_check.py  to_static inference, compiled training, the predictor on CUDA (issue 14)
#   bench_train       sampan bench fit's compiled-training rows on CUDA              (issue 14)
#   pytest            the tests whose behaviour differs when a GPU is present
#   sampan bench amp  fp32 vs fp16 vs bf16 training-step ratios on CUDA
# GPU_CHECKS="amp pytest" runs only the steps named. Logs go to $OUT (or ./gpu-check-logs); each log ends with the step's exit code, and a summary prints last.
# Where sampan is not installed, it runs from the checkout (PYTHONPATH=platform:widgets). Python packages missing
# on that machine can be put as wheels in .whl/ (they are installed into a scratch folder first).
set -u
OUT=${OUT:-gpu-check-logs}
mkdir -p "$OUT"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$scratch/site" \
    .whl/*.whl && export PYTHONPATH="$scratch/site"
fi
export PYTHONPATH=platform:widgets${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export SAMPAN_DATA=${SAMPAN_DATA:-$scratch/sampan-data}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda',
torch.version.cuda, '| cudnn', torch.backends.cudnn.version(), '|', torch.cuda.get_device_name())"
  grep -m1 'model name' /proc/cpuinfo; nproc
  python3 -c "import sampan, sampan_widgets, sampan.amp, sampan.distributed, sampan.monitor; print('sampan', sampan.__version__, 'imports')"
} 2>&1 | tee "$OUT/env.log"

summary=()
step() {  # step NAME SECONDS COMMAND...   (GPU_CHECKS="amp monitor" runs only those steps)
  local name=$1 limit=$2 rc start=$SECONDS
  shift 2
  [[ -z "${GPU_CHECKS:-}" || " $GPU_CHECKS " == *" $name "* ]] || return 0
  echo "== $name (limit ${limit}s)"
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "rc=$rc" >>"$OUT/$name.log"
  tail -n 30 "$OUT/$name.log"
  summary+=("$name: rc=$rc in $((SECONDS - start)) s")
}

step amp 180 python3 examples/gpu_checks/amp_check.py
step monitor 90 python3 examples/gpu_checks/monitor_check.py
step fsdp 90 python3 examples/gpu_checks/fsdp_check.py
step bench_amp 60 python3 -m sampan bench amp --quick
step compile 200 python3 examples/gpu_checks/compile_check.py --quick
step bench_train 120 python3 -c "from sampan.bench.fit import compiled_training; compiled_training(quick=True)"
step pytest 150 python3 -m pytest -q -p no:cacheprovider -n 4 \
  tests/platform/inference/test_predictor.py tests/platform/hapi/test_model.py tests/platform/hapi/test_errors.py \
  tests/platform/monitor tests/widgets/test_resource_monitor.py tests/platform/amp \
  tests/platform/jit/test_static_training.py tests/platform/jit/test_to_static_choice.py

echo; echo "### summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.log"
