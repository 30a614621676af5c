// Measured device choice in Node: rlx.calibrate() times small graphs on
// the CPU, and compile(graph, { device: 'auto' }) reports its estimate
// with the measured figures (nominal ones before, and after clearing).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

const graph = () =>
  rlx.Graph.fromText("graph @g(%a: f32[64,64]) {\n  %b = matmul(%a, %a)\n  return %b\n}");

test("calibrate() measures the CPU and device: 'auto' decides by the figures", async () => {
  await rlx.init();
  rlx.clearCalibrations();
  let m = await rlx.compile(graph(), { device: "auto" });
  assert.equal(m.device, "cpu");
  let auto = m.dispatchReport().auto;
  assert.deepEqual(auto.order[0], "cpu");
  assert.equal(auto.estimates[0].figures, "nominal");
  m.dispose();

  const [fig] = await rlx.calibrate({ devices: ["cpu"] });
  assert.equal(fig.device, "cpu");
  assert.ok(fig.gemm_gflops > 0.05 && fig.gemm_gflops < 1e5, `${fig.gemm_gflops} GFLOP/s`);
  assert.ok(fig.launch_us >= 0 && fig.launch_us < 1e4, `${fig.launch_us} µs`);
  assert.equal(fig.transfer_gbps, null);

  m = await rlx.compile(graph(), { device: "auto" });
  auto = m.dispatchReport().auto;
  assert.equal(auto.estimates[0].figures, "measured");
  // The product's 2·64³ FLOP at the measured rate, plus a few kernels.
  const want = (2 * 64 ** 3) / (fig.gemm_gflops * 1e9) * 1e3;
  const ms = auto.estimates[0].estimate_ms;
  assert.ok(fig.run_us > 0, `${fig.run_us} µs per run`);
  assert.ok(ms >= want + fig.run_us / 1e3 - 1e-9 && ms <= want + 0.01 + 0.02 * fig.launch_us + fig.run_us / 1e3, `${ms} ms vs ${want} ms + a run`);
  const [y] = await m.run({ a: new Float32Array(64 * 64).fill(1) });
  assert.equal(y.data[0], 64);
  m.dispose();

  // Figures that cannot be costs, and bad options, are typed errors.
  assert.throws(() => rlx.setCalibration({ ...fig, gemm_gflops: 0 }), (e) => e.code === "invalid_argument" && /calibration of cpu/.test(e.message));
  assert.throws(() => rlx.setCalibration("fast"), (e) => e.code === "invalid_argument");
  await assert.rejects(rlx.calibrate({ device: "cpu" }), (e) => e.code === "invalid_argument" && /unknown option `device`/.test(e.message));
  await assert.rejects(rlx.calibrate({ devices: ["tpu"] }), (e) => e.code === "invalid_argument");

  rlx.clearCalibrations();
  m = await rlx.compile(graph(), { device: "auto" });
  assert.equal(m.dispatchReport().auto.estimates[0].figures, "nominal");
  m.dispose();
});
