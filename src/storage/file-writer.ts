import { createHash, randomBytes } from "node:crypto";
import { bulkPace } from "./bulk-pace.js";
import type { Database } from "./database.js";

export const newFileId = () => `file-${randomBytes(18).toString("base64url")}`;

/** The file would grow past the bytes its account may still keep. */
export class FileQuotaExceeded extends Error {
  constructor(readonly room: number) {
    super(`The file would pass the ${room} bytes its account may still store.`);
  }
}

/**
 * Bytes per chunk row. Embedded PGlite runs each statement on the event loop, at about 50 ms per
 * MiB of bytea, so a chunk of this size holds it for a few milliseconds: other tenants' statements
 * and requests interleave with a large upload instead of waiting for it.
 */
export const FILE_CHUNK_BYTES = 256 * 1024;

/** A file being written a chunk at a time: invisible (not listed, not readable) until committed. */
export interface FileWriter {
  readonly id: string;
  /** Bytes appended so far. */
  readonly bytes: number;
  /** Buffers the bytes and writes every full chunk; throws FileQuotaExceeded past the writer's room. */
  append(data: Uint8Array): Promise<void>;
  /** Writes what is buffered (call it outside any transaction, before `commit`). */
  flush(): Promise<void>;
  /** Makes the file visible, in `tx` when given (with the batch that produced it, say). */
  commit(tx?: Database): Promise<StoredFile>;
  /** Drops the file and what was written of it. */
  abort(): Promise<void>;
}

/** A file's description, without its bytes. */
export interface StoredFile {
  id: string;
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
}

export interface FileRow {
  id: string;
  purpose: string;
  filename: string;
  bytes: number;
  created_at: Date | string;
}

export const FILE_COLUMNS = "id, purpose, filename, bytes, created_at";

export const toStoredFile = (row: FileRow): StoredFile => ({
  id: row.id,
  purpose: row.purpose,
  filename: row.filename,
  bytes: Number(row.bytes),
  createdAt: new Date(row.created_at),
});

/** Writes a file's chunks in order, each with its checksum, paced behind interactive work. */
function chunkWriter(db: Database, id: string): (chunk: Buffer) => Promise<void> {
  let seq = 0;
  return async (chunk) => {
    await bulkPace();
    const digest = createHash("sha256").update(chunk).digest("hex");
    // The row's size grows with its chunks, so the account's usage counts a file while it is written.
    await db.query(
      "WITH chunk AS (INSERT INTO file_chunks (file_id, seq, sha256, content) VALUES ($1, $2, $3, decode($4, 'base64'))) UPDATE files SET bytes = bytes + $5 WHERE id = $1",
      [id, seq++, digest, chunk.toString("base64"), chunk.byteLength],
    );
  };
}

/** Opens a file row (incomplete) and returns its writer. `room`: the bytes the file may reach. */
export async function openFileWriter(
  db: Database,
  accountId: string,
  file: { purpose: string; filename: string; room?: number },
): Promise<FileWriter> {
  const id = newFileId();
  await db.query("INSERT INTO files (id, account_id, purpose, filename, bytes, sha256, complete) VALUES ($1, $2, $3, $4, 0, '', false)", [
    id,
    accountId,
    file.purpose,
    file.filename,
  ]);
  const hash = createHash("sha256");
  const room = file.room ?? Number.MAX_SAFE_INTEGER;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let bytes = 0;
  const writeChunk = chunkWriter(db, id);
  const drain = async (all: boolean) => {
    while (pendingBytes >= FILE_CHUNK_BYTES || (all && pendingBytes > 0)) {
      const joined = Buffer.concat(pending);
      const chunk = joined.subarray(0, FILE_CHUNK_BYTES);
      const rest = joined.subarray(chunk.byteLength);
      pending = rest.byteLength > 0 ? [rest] : [];
      pendingBytes = rest.byteLength;
      await writeChunk(chunk);
    }
  };
  return {
    id,
    get bytes() {
      return bytes;
    },
    async append(data) {
      if (bytes + data.byteLength > room) throw new FileQuotaExceeded(room);
      bytes += data.byteLength;
      hash.update(data);
      pending.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      pendingBytes += data.byteLength;
      await drain(false);
    },
    flush: () => drain(true),
    async commit(tx = db) {
      const rows = await tx.query<FileRow>(
        `UPDATE files SET complete = true, bytes = $2, sha256 = $3 WHERE id = $1 RETURNING ${FILE_COLUMNS}`,
        [id, bytes, hash.copy().digest("hex")],
      );
      return toStoredFile(rows[0]!);
    },
    async abort() {
      await db.query("DELETE FROM files WHERE id = $1", [id]);
    },
  };
}
