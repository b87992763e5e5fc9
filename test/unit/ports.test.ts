import { ephemeralStart, FETCH_BLOCKED_PORTS, freePorts, pickRange } from '../../scripts/ports';

describe('listening ports for local etcd clusters', () => {
  const worker = process.env.JEST_WORKER_ID;
  afterEach(() => {
    if (worker === undefined) delete process.env.JEST_WORKER_ID;
    else process.env.JEST_WORKER_ID = worker;
  });

  it('when jest workers 1 to 8 pick ports, then their slices of the range below the ephemeral ports do not overlap', () => {
    const slices = [1, 2, 3, 4, 5, 6, 7, 8].map((id) => {
      process.env.JEST_WORKER_ID = String(id);
      return pickRange(32_768);
    });
    for (const [i, [from, to]] of slices.entries()) {
      expect(from).toBeGreaterThanOrEqual(10_000);
      expect(to).toBeLessThanOrEqual(32_768);
      for (const [j, [otherFrom, otherTo]] of slices.entries()) if (i !== j) expect(to <= otherFrom || otherTo <= from).toBe(true);
    }
  });

  it('when not in a jest worker, then the whole range below the ephemeral ports is used', () => {
    delete process.env.JEST_WORKER_ID;
    expect(pickRange(32_768)).toEqual([10_000, 32_768]);
  });

  it("when one process asks for ports again and again, then no port is handed out twice and all lie in its worker's slice", async () => {
    process.env.JEST_WORKER_ID = '3';
    const [from, to] = pickRange(ephemeralStart());
    const ports = [...(await freePorts(30)), ...(await freePorts(30))];
    expect(new Set(ports).size).toBe(60);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(from);
      expect(port).toBeLessThan(to);
    }
  });

  it("when a random pick lands on 10080, one of the Fetch standard's bad ports (Node's fetch refuses it), then it is passed over", async () => {
    process.env.JEST_WORKER_ID = '1';
    const [from, to] = pickRange(ephemeralStart());
    expect(FETCH_BLOCKED_PORTS.has(10_080) && from <= 10_080 && 10_080 < to).toBe(true);
    const random = jest.spyOn(Math, 'random').mockReturnValueOnce((10_080 - from + 0.5) / (to - from));
    try {
      const [port] = await freePorts(1);
      // Passed over, so another pick followed (more than one when that port was in use).
      expect(random.mock.calls.length).toBeGreaterThanOrEqual(2);
      expect(port).not.toBe(10_080);
    } finally {
      random.mockRestore();
    }
  });
});
