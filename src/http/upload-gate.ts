import { RateLimited } from "../errors.js";

/**
 * Uploads are streamed to storage, but each holds a connection, a file being written and a share of
 * the database's time while it lasts, so how many are read at once is capped twice: per account, so
 * one tenant cannot take the server's upload capacity, and for the process, so many tenants together
 * cannot either. A slot is taken before the body is read.
 */
export class UploadGate {
  private readonly byAccount = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: { uploadsPerAccount: number; uploadsInFlight: number }) {}

  /** Takes a slot for the account, or throws a 429; the returned function frees it (once, however often it is called). */
  take(accountId: string): () => void {
    const mine = this.byAccount.get(accountId) ?? 0;
    if (mine >= this.limits.uploadsPerAccount) {
      throw new RateLimited(
        `This account is already uploading ${mine} files, the most it may at once; retry when one has finished.`,
        1,
        "too_many_uploads",
      );
    }
    if (this.total >= this.limits.uploadsInFlight) {
      throw new RateLimited("The server is reading as many uploads as it may at once; retry shortly.", 1, "too_many_uploads");
    }
    this.byAccount.set(accountId, mine + 1);
    this.total++;
    let freed = false;
    return () => {
      if (freed) return;
      freed = true;
      this.total--;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left > 0) this.byAccount.set(accountId, left);
      else this.byAccount.delete(accountId);
    };
  }
}
