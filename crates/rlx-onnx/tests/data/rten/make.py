"""ONNX node tests converted to .rten by rten-convert (in one process):
DIR/test_x/model.onnx -> OUT/test_x.rten, for rlx's .rten import to run
against the tests' own inputs and expected outputs.

    pip install rten-convert==0.22.0 onnx==1.22.0 numpy==2.4.6 flatbuffers==25.12.19
    python3 crates/rlx-onnx/tests/data/rten/make.py crates/rlx-onnx/tests/data/node crates/rlx-onnx/tests/data/rten --sample
    python3 crates/rlx-onnx/tests/data/rten/make.py .cache/onnx/onnx/backend/test/data/node .cache/onnx-rten

Prints how many converted; a model rten-convert refuses is skipped (the
runner then reports it as not convertible). With --sample (the committed
sample, tests/data/rten), models rten-convert converts with a loss are
skipped too (LOSSY); the whole-suite table (docs/rten-coverage.md) keeps
them, as failures.
"""
import contextlib
import io
import sys
from pathlib import Path

import onnx
from rten_convert.converter import Metadata, graph_from_onnx_graph, serialize_model, write_header
from rten_convert.tensor_data import TensorDataBuilder
from rten_convert.util import round_up, write_padding


# Converted, but not to the same model: the sequence inputs lose their type,
# If bodies are graphs of RTen's own (not read by rlx), and an omitted
# Softmax axis is written as 0 (ONNX's default is -1).
LOSSY = {"test_identity_sequence", "test_sequence_insert_at_back", "test_if_seq",
         "test_logsoftmax_example_1", "test_softmax_example"}


def convert(src: Path, dst: Path) -> None:
    """rten-convert's own steps (shape inference, graph, v2 file)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(src), data_prop=True)
    tensor_data = TensorDataBuilder()
    data = serialize_model(graph_from_onnx_graph(model.graph), Metadata(), tensor_data)
    out = io.BytesIO()
    header = 32
    data_at = round_up(header + len(data), 64)
    write_header(out, header, len(data), data_at)
    out.write(data)
    write_padding(out, data_at - out.tell())
    tensor_data.write(out)
    dst.write_bytes(out.getvalue())


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    sample = "--sample" in sys.argv[3:]
    dst.mkdir(parents=True, exist_ok=True)
    ok = bad = 0
    for d in sorted(src.iterdir()):
        if not (d / "model.onnx").exists() or "_expanded" in d.name:
            continue
        if sample and d.name in LOSSY:
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                convert(d / "model.onnx", dst / f"{d.name}.rten")
            ok += 1
        except Exception:  # rten-convert refuses the model: not convertible
            bad += 1
    print(f"converted {ok}, rten-convert refused {bad}")


if __name__ == "__main__":
    main()
