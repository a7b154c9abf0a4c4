/**
 * One holder per key at a time, in this process: concurrent acquires of one scope key queue up
 * instead of racing to create the same container. (Across processes, Docker's name uniqueness
 * does that job: the loser gets a 409 and re-inspects.)
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let unlock!: () => void;
    const mine = new Promise<void>((resolve) => (unlock = resolve));
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      unlock();
      // The last one out leaves no entry behind.
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
