/**
 * `make`, run on the first call and its promise shared by every later one — unless it rejects:
 * a failure (a config file being fixed, an API key not set yet) is not kept, and the next call
 * runs `make` again.
 */
export function onceUntilFailure<T>(make: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    if (pending) return pending;
    const attempt = new Promise<T>((resolve) => resolve(make()));
    pending = attempt;
    attempt.catch(() => {
      if (pending === attempt) pending = undefined;
    });
    return attempt;
  };
}
