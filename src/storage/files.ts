import { createHash, randomBytes } from "node:crypto";
import type { Database } from "./database.js";

/** A file's description, without its bytes. */
export interface StoredFile {
  id: string;
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
}

export interface FileListQuery {
  purpose?: string;
  limit: number;
  order: "asc" | "desc";
  /** A file id: list the files after it in `order`. */
  after?: string;
}

/** The stored bytes no longer match the checksum taken when they were written. */
export class FileCorrupted extends Error {}

/**
 * Files (the Files API), kept in the deployment's database with the SHA-256 of their bytes.
 * Every call names the account: another account's file reads as absent.
 */
export interface FileStore {
  create(accountId: string, file: { purpose: string; filename: string; content: Uint8Array }, tx?: Database): Promise<StoredFile>;
  get(accountId: string, id: string): Promise<StoredFile | null>;
  /** The bytes, checked against their checksum (FileCorrupted when they differ). */
  content(accountId: string, id: string): Promise<Buffer | null>;
  list(accountId: string, query: FileListQuery): Promise<StoredFile[]>;
  delete(accountId: string, id: string): Promise<boolean>;
  /** How many files and bytes the account keeps (the per-account caps). */
  usage(accountId: string): Promise<{ files: number; bytes: number }>;
}

interface FileRow {
  id: string;
  purpose: string;
  filename: string;
  bytes: number;
  created_at: Date | string;
}

const COLUMNS = "id, purpose, filename, bytes, created_at";

export const sha256 = (content: Uint8Array) => createHash("sha256").update(content).digest("hex");

export const newFileId = () => `file-${randomBytes(18).toString("base64url")}`;

const toFile = (row: FileRow): StoredFile => ({ id: row.id, purpose: row.purpose, filename: row.filename, bytes: Number(row.bytes), createdAt: new Date(row.created_at) });

export function createFileStore(db: Database): FileStore {
  return {
    async create(accountId, { purpose, filename, content }, tx = db) {
      const rows = await tx.query<FileRow>(
        `INSERT INTO files (id, account_id, purpose, filename, bytes, sha256, content) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
        [newFileId(), accountId, purpose, filename, content.byteLength, sha256(content), content],
      );
      return toFile(rows[0]!);
    },
    async get(accountId, id) {
      const rows = await db.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE id = $1 AND account_id = $2`, [id, accountId]);
      return rows[0] ? toFile(rows[0]) : null;
    },
    async content(accountId, id) {
      const rows = await db.query<{ content: Uint8Array; sha256: string }>("SELECT content, sha256 FROM files WHERE id = $1 AND account_id = $2", [id, accountId]);
      const row = rows[0];
      if (!row) return null;
      const content = Buffer.from(row.content);
      if (sha256(content) !== row.sha256) throw new FileCorrupted(`The stored bytes of file ${id} do not match their checksum.`);
      return content;
    },
    async list(accountId, { purpose, limit, order, after }) {
      const params: unknown[] = [accountId, limit];
      const where = ["account_id = $1"];
      if (purpose !== undefined) where.push(`purpose = $${params.push(purpose)}`);
      const direction = order === "asc" ? "ASC" : "DESC";
      if (after !== undefined) {
        const comparison = order === "asc" ? ">" : "<";
        where.push(`(created_at, id) ${comparison} (SELECT created_at, id FROM files WHERE id = $${params.push(after)} AND account_id = $1)`);
      }
      const rows = await db.query<FileRow>(`SELECT ${COLUMNS} FROM files WHERE ${where.join(" AND ")} ORDER BY created_at ${direction}, id ${direction} LIMIT $2`, params);
      return rows.map(toFile);
    },
    async delete(accountId, id) {
      const rows = await db.query("DELETE FROM files WHERE id = $1 AND account_id = $2 RETURNING id", [id, accountId]);
      return rows.length > 0;
    },
    async usage(accountId) {
      const rows = await db.query<{ files: string | number; bytes: string | number }>("SELECT count(*) AS files, COALESCE(sum(bytes), 0) AS bytes FROM files WHERE account_id = $1", [accountId]);
      return { files: Number(rows[0]?.files ?? 0), bytes: Number(rows[0]?.bytes ?? 0) };
    },
  };
}
