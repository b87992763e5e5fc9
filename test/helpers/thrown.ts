/** What `call` threw, or undefined when it returned: for tests that inspect a refusal's fields. */
export function thrownBy(call: () => unknown): unknown {
  try {
    call();
  } catch (err) {
    return err;
  }
  return undefined;
}
