import assert from "node:assert/strict";
import { test } from "node:test";
import { loadSettings } from "../../src/config/settings.js";
import { AdminThrottle } from "../../src/http/admin-throttle.js";

function throttleAt(start = 1_000_000) {
  const clock = { now: start };
  return { clock, throttle: new AdminThrottle({ maxFailures: 3, lockoutMs: 60_000, maxTracked: 2 }, () => clock.now) };
}

test("the admin key must be at least 32 characters, as the worker key must be 16", () => {
  assert.throws(
    () => loadSettings({}, { SWITCHYARD_ADMIN_KEY: "x".repeat(31) }),
    /Invalid setting 'adminKey': must be at least 32 characters/,
  );
  assert.equal(loadSettings({}, { SWITCHYARD_ADMIN_KEY: "x".repeat(32) }).adminKey, "x".repeat(32));
  const defaults = loadSettings({}, {});
  assert.deepEqual([defaults.adminMaxFailures, defaults.adminLockoutMs], [10, 60_000]);
  assert.throws(() => loadSettings({}, { SWITCHYARD_ADMIN_LOCKOUT_S: "soon" }), /adminLockoutMs/);
});

test("maxFailures failures lock the address out for the lockout period; then it may try again", () => {
  const { clock, throttle } = throttleAt();
  throttle.failed("10.0.0.1");
  throttle.failed("10.0.0.1");
  assert.equal(throttle.lockedFor("10.0.0.1"), 0);
  throttle.failed("10.0.0.1");
  assert.equal(throttle.lockedFor("10.0.0.1"), 60_000);
  assert.equal(throttle.lockedFor("10.0.0.2"), 0, "per address");
  clock.now += 59_999;
  assert.equal(throttle.lockedFor("10.0.0.1"), 1);
  clock.now += 1;
  assert.equal(throttle.lockedFor("10.0.0.1"), 0);
  // A fresh count after the lockout: it takes maxFailures again.
  throttle.failed("10.0.0.1");
  throttle.failed("10.0.0.1");
  assert.equal(throttle.lockedFor("10.0.0.1"), 0);
});

test("failures older than the period do not add up, and a success clears the count", () => {
  const { clock, throttle } = throttleAt();
  throttle.failed("a");
  throttle.failed("a");
  clock.now += 60_000;
  throttle.failed("a");
  assert.equal(throttle.lockedFor("a"), 0, "two old failures and one new are not three in a period");
  throttle.failed("a");
  throttle.succeeded("a");
  throttle.failed("a");
  throttle.failed("a");
  assert.equal(throttle.lockedFor("a"), 0);
});

test("memory is bounded: beyond maxTracked the longest-tracked address is forgotten", () => {
  const { throttle } = throttleAt();
  for (let i = 0; i < 3; i++) throttle.failed("first");
  assert.ok(throttle.lockedFor("first") > 0);
  throttle.failed("second");
  throttle.failed("third");
  assert.equal(throttle.lockedFor("first"), 0);
});
