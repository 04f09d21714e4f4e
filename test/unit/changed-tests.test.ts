// npm run test:changed's selection: a test runs when its imports (or the server it starts) reach a
// changed file; a change the import graph cannot place selects every test.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { test } from "node:test";
import { selectTests, TEST_FILES } from "../../scripts/changed-tests.js";
import { ROOT } from "../helpers/server.js";

const select = (...paths: string[]) => {
  const { selected } = selectTests(new Set(paths.map((path) => join(ROOT, path))));
  return selected.map((path) => relative(ROOT, path));
};

test("a change to pure pricing code selects the tests that import it, and no test that does not reach it", () => {
  const selected = select("src/billing/cost.ts");
  assert.ok(selected.includes("test/unit/pricing.test.ts"), selected.join(" "));
  // (The docs test reaches it: the endpoint table it checks is generated from the OpenAPI document.)
  assert.ok(!selected.includes("test/unit/text-stream.test.ts"));
  assert.ok(!selected.includes("test/unit/tier-queue.test.ts"));
  // The integration tests run the built server, which runs every file of src/.
  assert.ok(selected.includes("test/integration/chat-api.test.ts"));
});

test("a change to a page of the docs selects the docs test alone", () => {
  assert.deepEqual(select("docs/api/chat.md"), ["test/unit/docs.test.ts"]);
});

test("a change outside the import graph (package.json) selects every test", () => {
  assert.equal(select("package.json").length, TEST_FILES.length);
});
