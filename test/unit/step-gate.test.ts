import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StepGate } from "../../src/engine/step-gate.js";

describe("step gate: streams pause before their next step while a context operation waits", () => {
  it("is open when no operation waits", async () => {
    const gate = new StepGate();
    let passed = false;
    await gate.wait().then(() => (passed = true));
    assert.ok(passed);
  });

  it("holds streams back until every waiting operation has run, and passes the result and errors through", async () => {
    const gate = new StepGate();
    const order: string[] = [];
    let finishFirst!: () => void;
    const first = gate.exclusive(() => new Promise<string>((resolve) => (finishFirst = () => resolve("erased"))));
    const second = gate.exclusive(async () => {
      throw new Error("sequence disposed");
    });
    const stream = gate.wait().then(() => order.push("stream"));
    await assert.rejects(second, /sequence disposed/);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(order, [], "still held while the first operation waits");
    finishFirst();
    assert.equal(await first, "erased");
    await stream;
    assert.deepEqual(order, ["stream"]);
    let passed = false;
    await gate.wait().then(() => (passed = true));
    assert.ok(passed, "open again");
  });
});
