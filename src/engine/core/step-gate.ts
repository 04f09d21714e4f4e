/**
 * A model's steps against changes to the model itself (loading or freeing a LoRA adapter). llama.cpp
 * keeps the model's adapters in one list that a context reads when it reserves its graph, which
 * happens inside a decode, on a shard's thread; the list is changed on the main thread. So a change
 * waits until no shard has a step in flight, and steps wait while a change waits or runs (one step
 * of each shard at most, ~0.1-0.3 s).
 */
export class StepGate {
  private stepping = 0;
  /** Settles when the change that holds the gate ends; absent: none holds it. */
  private changing: Promise<void> | undefined;
  private idle: (() => void) | undefined;

  /** Before a step's decode: waits while a change holds the gate. */
  async enterStep(): Promise<void> {
    while (this.changing) await this.changing;
    this.stepping++;
  }

  /** After the step's reply. */
  leaveStep(): void {
    this.stepping--;
    if (this.stepping === 0) this.idle?.();
  }

  /** Runs `change` once no step is in flight; steps wait until it ends. Changes run one at a time. */
  async exclusive<T>(change: () => T | Promise<T>): Promise<T> {
    while (this.changing) await this.changing;
    let release!: () => void;
    this.changing = new Promise<void>((resolve) => (release = resolve));
    try {
      if (this.stepping > 0) await new Promise<void>((resolve) => (this.idle = resolve));
      this.idle = undefined;
      return await change();
    } finally {
      this.changing = undefined;
      release();
    }
  }
}
