import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Big from "big.js";
import { createTestDatabase, serverDatabaseReader, type TestDatabase } from "../helpers/databases.js";
import { createKey, postChat, SMOLLM2, startServer, type RunningServer, emptyDataDir } from "../helpers/server.js";
import { api, waitForDeployment } from "../helpers/deployments.js";

/**
 * Issue 13: a restart brings running deployments back, and instance time is billed exactly once
 * across it, even when the server was killed with SIGKILL: the killed process's interval ends at
 * its last heartbeat, every interval is billed to its end, and no millisecond twice.
 */
const ENV = {
  SWITCHYARD_DEPLOYMENT_TICK_MS: "300",
  SWITCHYARD_DEPLOYMENT_SEGMENT_S: "1",
  SWITCHYARD_MAX_CONTEXT: "1024",
  SWITCHYARD_PARALLEL: "2",
};

for (const kind of ["pglite", "postgres"] as const) {
  describe(`deployments across kill -9 and a restart on ${kind}`, () => {
    const dataDir = kind === "pglite" ? emptyDataDir("switchyard-dep-restart-") : mkdtempSync(join(tmpdir(), "switchyard-dep-restart-"));
    let database: TestDatabase | undefined;
    let env: NodeJS.ProcessEnv = { ...ENV };
    let server: RunningServer | undefined;
    let key = "";

    /** The database as the test reads it: the test database on PostgreSQL, the data dir's PGlite while no server runs. */
    const withDb = serverDatabaseReader(dataDir, () => database);

    before(async () => {
      if (kind === "postgres") {
        database = await createTestDatabase("postgres");
        env = { ...env, SWITCHYARD_DATABASE_URL: database.url };
      }
      key = createKey(dataDir, "keeper", ["--manage-deployments"], env);
      server = await startServer({ dataDir, key, env });
    });
    after(async () => {
      await server?.stop();
      await database?.dispose();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test("a killed server's deployment comes back on restart, billed exactly once", async () => {
      const created = await api(server!, key, "POST", "/v1/deployments", { model: SMOLLM2, name: "keeper", max_batch_size: 1 });
      await waitForDeployment(server!, key, created.body.id, (d) => d.status === "running");
      await new Promise((r) => setTimeout(r, 1500));
      const killedAt = Date.now();
      const exited = new Promise((resolve) => server!.process.once("exit", resolve));
      server!.process.kill("SIGKILL");
      await exited;

      server = await startServer({ dataDir, key, env });
      const back = await waitForDeployment(server, key, created.body.id, (d) => d.status === "running" && d.instances.running === 1);
      assert.equal(back.model_id, "keeper/keeper");
      const reply = await postChat(server, { model: "keeper/keeper", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
      assert.equal(reply.status, 200);
      await new Promise((r) => setTimeout(r, 1000));
      await server.stop();
      server = undefined;

      await withDb(async (db) => {
        const intervals = await db.query<{
          id: string;
          ended: boolean;
          billed: boolean;
          ms: string;
          started: Date;
          ended_at: Date;
          heartbeat_at: Date;
        }>(
          `SELECT id, ended_at IS NOT NULL AS ended, billed_until = ended_at AS billed, started_at AS started, ended_at, heartbeat_at,
                  (extract(epoch FROM ended_at - started_at) * 1000)::bigint::text AS ms
             FROM deployment_instances WHERE deployment_id = $1 ORDER BY started_at`,
          [created.body.id],
        );
        assert.equal(intervals.length, 2, "one interval before the kill, one after the restart");
        for (const i of intervals) assert.ok(i.ended && i.billed, "every interval closed and billed to its end");
        assert.ok(intervals[0]!.ended_at.getTime() <= killedAt, "the killed instance is billed only up to its last heartbeat");
        assert.ok(intervals[0]!.ended_at.getTime() <= intervals[1]!.started.getTime());
        const ran = intervals.reduce((sum, i) => sum.plus(i.ms), new Big(0)).div(1000);
        const [billed] = await db.query<{ seconds: string; cost: string; overlaps: string }>(
          `SELECT sum(seconds)::text AS seconds, sum(cost_usd)::text AS cost,
                  (SELECT count(*) FROM deployment_usage a JOIN deployment_usage b
                     ON a.instance_id = b.instance_id AND a.start_at < b.start_at AND b.start_at < a.end_at)::text AS overlaps
             FROM deployment_usage WHERE deployment_id = $1`,
          [created.body.id],
        );
        assert.equal(new Big(billed!.seconds).toFixed(), ran.toFixed(), "billed seconds = the seconds instances ran, exactly");
        assert.equal(new Big(billed!.cost).toFixed(), ran.times("0.36").div(3600).toFixed(), "cost = seconds × hourly ÷ 3600");
        assert.equal(billed!.overlaps, "0");
      });
    });
  });
}
