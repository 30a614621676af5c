// A Rust panic never escapes as a bare wasm trap: it is an RlxError with
// code 'panic' and the panic's message, and the module then refuses every
// call with the same error. Its own file: the module is unusable after it.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

test("a panic becomes RlxError('panic') and poisons the module", async () => {
  await rlx.init();
  assert.throws(() => rlx.__testPanic(), (e) => {
    assert.equal(e.name, "RlxError");
    assert.equal(e.code, "panic");
    assert.match(e.message, /deliberate panic for the boundary test/);
    return true;
  });
  assert.throws(() => rlx.ops(), (e) => e.code === "panic");
  await assert.rejects(rlx.devices(), (e) => e.code === "panic");
});
