import { createHash } from "node:crypto";
import { bulkPace } from "./bulk-pace.js";
import type { Database } from "./database.js";
import { FILE_COLUMNS, openFileWriter, toStoredFile, type FileRow, type FileWriter, type StoredFile } from "./file-writer.js";

export interface FileListQuery {
  purpose?: string;
  limit: number;
  order: "asc" | "desc";
  /** A file id: list the files after it in `order`. */
  after?: string;
}

/** The stored bytes no longer match the checksum taken when they were written. */
export class FileCorrupted extends Error {}

export type { FileWriter, StoredFile };
export { FileQuotaExceeded, newFileId } from "./file-writer.js";

/**
 * Files (the Files API), kept in the deployment's database in chunks, each with the SHA-256 of its
 * bytes. Every call names the account: another account's file reads as absent, and so does a file
 * still being written.
 */
export interface FileStore {
  /** A small file written whole (a batch's validation errors). */
  create(accountId: string, file: { purpose: string; filename: string; content: Uint8Array }): Promise<StoredFile>;
  /** A file written a chunk at a time; listed once committed. `room`: the bytes it may grow to. */
  open(accountId: string, file: { purpose: string; filename: string; room?: number }): Promise<FileWriter>;
  get(accountId: string, id: string): Promise<StoredFile | null>;
  /** The bytes chunk by chunk, each checked against its checksum (FileCorrupted when one differs); null when absent. */
  read(accountId: string, id: string): Promise<{ file: StoredFile; chunks: AsyncIterable<Buffer> } | null>;
  /** The bytes whole (small files and tests); checked as `read` checks them. */
  content(accountId: string, id: string): Promise<Buffer | null>;
  list(accountId: string, query: FileListQuery): Promise<StoredFile[]>;
  delete(accountId: string, id: string): Promise<boolean>;
  /** How many files and bytes the account keeps, files being written included (the per-account caps). */
  usage(accountId: string): Promise<{ files: number; bytes: number }>;
  /** Drops files left half-written (their writer's process stopped) for longer than `olderThanSeconds`. */
  sweepIncomplete(olderThanSeconds: number): Promise<number>;
}

const COLUMNS = FILE_COLUMNS;

export const sha256 = (content: Uint8Array) => createHash("sha256").update(content).digest("hex");

export function createFileStore(db: Database): FileStore {
  const get = async (accountId: string, id: string) => {
    const rows = await db.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE id = $1 AND account_id = $2 AND complete`, [id, accountId]);
    return rows[0] ? toStoredFile(rows[0]) : null;
  };
  const store: FileStore = {
    async create(accountId, { purpose, filename, content }) {
      const writer = await openFileWriter(db, accountId, { purpose, filename });
      await writer.append(content);
      await writer.flush();
      return writer.commit();
    },
    open: (accountId, file) => openFileWriter(db, accountId, file),
    get,
    async read(accountId, id) {
      const file = await get(accountId, id);
      return file ? { file, chunks: readChunks(db, id) } : null;
    },
    async content(accountId, id) {
      const found = await store.read(accountId, id);
      if (!found) return null;
      const parts: Buffer[] = [];
      for await (const chunk of found.chunks) parts.push(chunk);
      return Buffer.concat(parts);
    },
    list: (accountId, options) => listFiles(db, accountId, options),
    async delete(accountId, id) {
      const rows = await db.query("DELETE FROM files WHERE id = $1 AND account_id = $2 AND complete RETURNING id", [id, accountId]);
      return rows.length > 0;
    },
    async usage(accountId) {
      const rows = await db.query<{ files: string | number; bytes: string | number }>(
        "SELECT count(*) AS files, COALESCE(sum(bytes), 0) AS bytes FROM files WHERE account_id = $1",
        [accountId],
      );
      return { files: Number(rows[0]?.files ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
    },
    async sweepIncomplete(olderThanSeconds) {
      const rows = await db.query("DELETE FROM files WHERE NOT complete AND created_at < now() - make_interval(secs => $1) RETURNING id", [
        olderThanSeconds,
      ]);
      return rows.length;
    },
  };
  return store;
}

/** The account's complete files, newest first (or oldest with `order: "asc"`), after a cursor file id. */
async function listFiles(db: Database, accountId: string, { purpose, limit, order, after }: Parameters<FileStore["list"]>[1]) {
  const params: unknown[] = [accountId, limit];
  const where = ["account_id = $1", "complete"];
  if (purpose !== undefined) where.push(`purpose = $${params.push(purpose)}`);
  const direction = order === "asc" ? "ASC" : "DESC";
  if (after !== undefined) {
    const comparison = order === "asc" ? ">" : "<";
    where.push(`(created_at, id) ${comparison} (SELECT created_at, id FROM files WHERE id = $${params.push(after)} AND account_id = $1)`);
  }
  const rows = await db.query<FileRow>(
    `SELECT ${COLUMNS} FROM files WHERE ${where.join(" AND ")} ORDER BY created_at ${direction}, id ${direction} LIMIT $2`,
    params,
  );
  return rows.map(toStoredFile);
}

/**
 * A file's chunks in order, one per statement; each is checked against its own checksum before it
 * is handed on, and the whole against the file's. A file stored before chunks keeps its bytes in
 * files.content: one chunk.
 */
async function* readChunks(db: Database, id: string): AsyncGenerator<Buffer> {
  const legacy = await db.query<{ content: Uint8Array | null; sha256: string }>("SELECT content, sha256 FROM files WHERE id = $1", [id]);
  const whole = legacy[0];
  if (!whole) return;
  if (whole.content !== null) {
    const content = Buffer.from(whole.content);
    if (sha256(content) !== whole.sha256) throw new FileCorrupted(`The stored bytes of file ${id} do not match their checksum.`);
    yield content;
    return;
  }
  const hash = createHash("sha256");
  for (let seq = 0; ; seq++) {
    await bulkPace();
    // One chunk per statement, by its key: a plan that cannot turn into a scan of the file's other chunks.
    const rows = await db.query<{ sha256: string; data: string }>(
      "SELECT sha256, encode(content, 'base64') AS data FROM file_chunks WHERE file_id = $1 AND seq = $2",
      [id, seq],
    );
    const row = rows[0];
    if (!row) break;
    const chunk = Buffer.from(row.data, "base64");
    if (sha256(chunk) !== row.sha256) throw new FileCorrupted(`Chunk ${seq} of file ${id} does not match its checksum.`);
    hash.update(chunk);
    yield chunk;
  }
  if (hash.digest("hex") !== whole.sha256) throw new FileCorrupted(`The stored bytes of file ${id} do not match their checksum.`);
}
