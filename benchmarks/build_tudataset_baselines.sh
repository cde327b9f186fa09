#!/usr/bin/env bash
# Build the TUDataset project's C++ kernel baselines (chrsmrrs/tudataset,
# tud_benchmark/kernel_baselines) as a Python module, and lay out the datasets the way its
# reader expects, so that the tests and benchmarks that compare against it run:
#
#   benchmarks/build_tudataset_baselines.sh TUDATASET_CHECKOUT EIGEN_CHECKOUT OUT [DATA]
#   export GRAMDIST_TUDATASET_BASELINES=OUT/lib
#
# TUDATASET_CHECKOUT: a clone of https://github.com/chrsmrrs/tudataset; EIGEN_CHECKOUT: a clone of
# Eigen 3 (https://gitlab.com/libeigen/eigen, or its GitHub mirror eigenteam/eigen-git-mirror;
# headers only). Needs g++ and pybind11 (pip install pybind11). DATA: the TU datasets
# (default $GRAMDIST_DATA, else ../shared/datasets); the module reads
# OUT/datasets/NAME/NAME/raw/NAME_*.txt relative to its working directory, which the
# benchmarks set to OUT. Takes about 30 s to compile.
set -euo pipefail
if [ $# -lt 3 ]; then
    sed -n '2,16p' "$0" >&2
    exit 2
fi
tud=$(cd "$1" && pwd); eigen=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd)
data=${4:-${GRAMDIST_DATA:-$(dirname "$0")/../../shared/datasets}}
data=$(cd "$data" && pwd)  # absolute: the links below must resolve from $out, not from here
src="$tud/tud_benchmark/kernel_baselines"
[ -f "$src/kernel_baselines.cpp" ] || { echo "no $src/kernel_baselines.cpp" >&2; exit 2; }
[ -d "$eigen/Eigen" ] || { echo "no Eigen/ in $eigen" >&2; exit 2; }
python -c "import pybind11" 2>/dev/null || { echo "pybind11 missing: pip install pybind11" >&2; exit 2; }

# the sources include <eigen3/Eigen/...>
mkdir -p "$out/include" "$out/lib"
ln -sfn "$eigen" "$out/include/eigen3"
suffix=$(python -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
( cd "$src" && g++ -O3 -march=native -w -shared -std=c++14 -fPIC -I "$out/include" -I "$eigen" \
    $(python -m pybind11 --includes) kernel_baselines.cpp src/*.cpp \
    -o "$out/lib/kernel_baselines$suffix" )

for dir in "$data"/*/; do
    name=$(basename "$dir")
    ls "$dir${name}"_A.txt >/dev/null 2>&1 || continue
    mkdir -p "$out/datasets/$name/$name/raw"
    ln -sf "$dir${name}"_*.txt "$out/datasets/$name/$name/raw/"
done
echo "built $out/lib/kernel_baselines$suffix; export GRAMDIST_TUDATASET_BASELINES=$out/lib"
