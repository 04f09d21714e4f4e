import assert from "node:assert/strict";
import { test } from "node:test";
import { exceededRight, type KeyRights } from "../../src/accounts/key-rights.js";
import { rightsOf, type KeyStanding } from "../../src/accounts/key-standing.js";

const UNRESTRICTED: KeyRights = {
  manageKeys: true,
  manageDeployments: true,
  allowedModels: null,
  budgetUsd: null,
  requestsPerMinute: null,
  tokensPerMinute: null,
  expiresAt: null,
};
const TOMORROW = new Date(Date.now() + 86_400_000);
/** The attacking key of issue 20: $0.001, 5 rpm, a day to live, allowed to manage keys. */
const SMALL: KeyRights = {
  manageKeys: true,
  manageDeployments: true,
  allowedModels: null,
  budgetUsd: "0.001",
  requestsPerMinute: 5,
  tokensPerMinute: null,
  expiresAt: TOMORROW,
};

test("equal rights are within: a key may always act on a copy of itself", () => {
  assert.equal(exceededRight(SMALL, SMALL), null);
  assert.equal(exceededRight(UNRESTRICTED, UNRESTRICTED), null);
});

test("an unrestricted key covers every other key", () => {
  assert.equal(exceededRight(UNRESTRICTED, SMALL), null);
  assert.equal(exceededRight(UNRESTRICTED, { ...SMALL, allowedModels: ["m"], tokensPerMinute: 10 }), null);
});

test("the issue's attack: every right beyond the creator's is named by its API field", () => {
  const grab: KeyRights = {
    manageKeys: true,
    manageDeployments: true,
    allowedModels: null,
    budgetUsd: "1000000",
    requestsPerMinute: 100_000,
    tokensPerMinute: null,
    expiresAt: new Date("2099-01-01"),
  };
  assert.equal(exceededRight(SMALL, grab)?.param, "budget_usd");
  assert.equal(exceededRight(SMALL, { ...grab, budgetUsd: "0.001" })?.param, "rpm_limit");
  assert.equal(exceededRight(SMALL, { ...grab, budgetUsd: "0.001", requestsPerMinute: 5 })?.param, "expires_at");
  assert.equal(exceededRight(SMALL, UNRESTRICTED)?.param, "budget_usd", "the account's unrestricted key has more than the small one");
});

test("boolean rights: a key without one cannot pass it on", () => {
  const plain = { ...UNRESTRICTED, manageKeys: false };
  const found = exceededRight(plain, UNRESTRICTED);
  assert.equal(found?.param, "manage_keys");
  assert.match(found!.message, /manage-keys right/);
  assert.equal(exceededRight(UNRESTRICTED, plain), null);
  const noDeploy = { ...UNRESTRICTED, manageDeployments: false };
  assert.equal(exceededRight(noDeploy, UNRESTRICTED)?.param, "manage_deployments");
});

test("models: a subset is within; a list-limited key cannot cover every model", () => {
  const own = { ...UNRESTRICTED, allowedModels: ["a", "b"] };
  assert.equal(exceededRight(own, { ...own, allowedModels: ["b"] }), null);
  assert.equal(exceededRight(own, { ...own, allowedModels: ["b", "c"] })?.message, "models this key cannot use itself: c");
  assert.equal(exceededRight(own, { ...own, allowedModels: null })?.param, "allowed_models");
});

test("budget: exact decimals; none is more than any", () => {
  const own = { ...UNRESTRICTED, budgetUsd: "0.3" };
  assert.equal(exceededRight(own, { ...own, budgetUsd: "0.30" }), null);
  assert.equal(exceededRight(own, { ...own, budgetUsd: "0.300000000000000001" })?.param, "budget_usd");
  assert.equal(exceededRight(own, { ...own, budgetUsd: null })?.param, "budget_usd");
});

test("rate limits: null (unlimited) is more than any number", () => {
  const own = { ...UNRESTRICTED, requestsPerMinute: 5, tokensPerMinute: 1000 };
  assert.equal(exceededRight(own, { ...own, requestsPerMinute: 4, tokensPerMinute: 1000 }), null);
  assert.equal(exceededRight(own, { ...own, requestsPerMinute: null })?.param, "rpm_limit");
  assert.equal(exceededRight(own, { ...own, tokensPerMinute: 1001 })?.param, "tpm_limit");
});

test("expiry: a key that expires cannot cover one that never does, nor a later one", () => {
  assert.equal(exceededRight(SMALL, { ...SMALL, expiresAt: new Date(TOMORROW.getTime() - 1000) }), null);
  assert.equal(exceededRight(SMALL, { ...SMALL, expiresAt: new Date(TOMORROW.getTime() + 1000) })?.param, "expires_at");
  assert.equal(exceededRight(SMALL, { ...SMALL, expiresAt: null })?.param, "expires_at");
});

test("rightsOf: the server default stands in for a key's missing rate limit; the budget is what is left or the whole", () => {
  const standing: KeyStanding = {
    manageKeys: true,
    manageDeployments: true,
    allowedModels: null,
    requestsPerMinute: null,
    tokensPerMinute: 7,
    budgetUsd: "1",
    spentUsd: "0.25",
    reservedUsd: "0.5",
    expiresAt: null,
  };
  const left = rightsOf(standing, { requestsPerMinute: 60, tokensPerMinute: 100 }, "left");
  assert.deepEqual([left.requestsPerMinute, left.tokensPerMinute, left.budgetUsd], [60, 7, "0.25"]);
  assert.equal(rightsOf(standing, { requestsPerMinute: null, tokensPerMinute: null }, "ceiling").budgetUsd, "1");
  assert.equal(
    rightsOf({ ...standing, spentUsd: "2" }, { requestsPerMinute: null, tokensPerMinute: null }, "left").budgetUsd,
    "0",
    "overspent: nothing left, never negative",
  );
});
