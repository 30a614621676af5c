// The first `device: 'auto'` compile of a process calibrates by itself (a
// file of its own: a process starts uncalibrated once).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

test("the first compile with device 'auto' calibrates, then estimates with measured figures", async () => {
  await rlx.init();
  const g = rlx.Graph.fromText("graph @g(%a: f32[8,8]) {\n  %b = matmul(%a, %a)\n  return %b\n}");
  const m = await rlx.compile(g, { device: "auto" });
  const auto = m.dispatchReport().auto;
  assert.equal(m.device, "cpu");
  assert.deepEqual(auto.estimates.map((e) => [e.device, e.figures]), [["cpu", "measured"]]);
  m.dispose();
});
