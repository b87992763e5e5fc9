import { nextAfter, parseCron } from '../../agent/lib/cron';

const at = (iso: string): Date => new Date(iso);

describe('cron: the next time a schedule fires (UTC)', () => {
  it.each<[string, string, string]>([
    // [expression, after, next]
    ['* * * * *', '2026-03-01T10:15:30Z', '2026-03-01T10:16:00.000Z'],
    ['* * * * *', '2026-03-01T10:15:00Z', '2026-03-01T10:16:00.000Z'],
    ['0 3 * * *', '2026-03-01T02:59:59Z', '2026-03-01T03:00:00.000Z'],
    ['0 3 * * *', '2026-03-01T03:00:00Z', '2026-03-02T03:00:00.000Z'],
    ['*/15 * * * *', '2026-03-01T10:15:00Z', '2026-03-01T10:30:00.000Z'],
    ['5/20 * * * *', '2026-03-01T10:26:00Z', '2026-03-01T10:45:00.000Z'],
    ['0 */6 * * *', '2026-03-01T07:00:00Z', '2026-03-01T12:00:00.000Z'],
    ['30 1-3 * * *', '2026-03-01T03:30:00Z', '2026-03-02T01:30:00.000Z'],
    ['0 0,12 * * *', '2026-03-01T00:00:00Z', '2026-03-01T12:00:00.000Z'],
    ['0 4 * * sun', '2026-03-02T00:00:00Z', '2026-03-08T04:00:00.000Z'],
    ['0 4 * * 7', '2026-03-02T00:00:00Z', '2026-03-08T04:00:00.000Z'],
    ['0 4 * * MON-FRI', '2026-03-06T05:00:00Z', '2026-03-09T04:00:00.000Z'],
    ['0 0 1 * *', '2026-01-31T12:00:00Z', '2026-02-01T00:00:00.000Z'],
    ['0 0 31 * *', '2026-04-01T00:00:00Z', '2026-05-31T00:00:00.000Z'],
    ['0 0 29 feb *', '2026-01-01T00:00:00Z', '2028-02-29T00:00:00.000Z'],
    // Both day fields restricted: either matches (Vixie cron). 2026-03-02 is a Monday.
    ['0 0 15 * mon', '2026-03-01T00:00:00Z', '2026-03-02T00:00:00.000Z'],
    ['0 0 15 * mon', '2026-03-13T00:00:00Z', '2026-03-15T00:00:00.000Z'],
    ['@hourly', '2026-03-01T10:00:00Z', '2026-03-01T11:00:00.000Z'],
    ['@daily', '2026-03-01T10:00:00Z', '2026-03-02T00:00:00.000Z'],
    ['@weekly', '2026-03-01T00:00:00Z', '2026-03-08T00:00:00.000Z'],
    ['@monthly', '2026-03-01T00:00:00Z', '2026-04-01T00:00:00.000Z'],
    ['@yearly', '2026-03-01T00:00:00Z', '2027-01-01T00:00:00.000Z'],
    ['  0 3 * * *  ', '2026-12-31T23:59:00Z', '2027-01-01T03:00:00.000Z'],
  ])('when the schedule is "%s" and it is %s, then it next fires at %s', (expression, after, next) => {
    expect(nextAfter(parseCron(expression), at(after))?.toISOString()).toBe(next);
  });

  it.each<[string, RegExp]>([
    ['', /1 field; a cron expression has 5/],
    ['* * * *', /4 fields/],
    ['* * * * * *', /6 fields/],
    ['60 * * * *', /minute: 60 is outside 0-59/],
    ['* 24 * * *', /hour: 24 is outside 0-23/],
    ['* * 0 * *', /day of month: 0 is outside 1-31/],
    ['* * * 13 *', /month: 13 is outside 1-12/],
    ['* * * * 8', /day of week: 8 is outside 0-7/],
    ['*/0 * * * *', /minute: step "0"/],
    ['5-1 * * * *', /runs backwards/],
    ['a * * * *', /minute: "a" is not a number/],
    ['* * * foo *', /month: "foo" is not a number or a name/],
    ['1,,2 * * * *', /minute: "" is not a value/],
    ['1/2/3 * * * *', /not a value, a range or a step/],
    ['0 0 30 2 *', /never fires/],
    ['@often', /1 field/],
  ])('when the schedule is "%s", then it is refused: %s', (expression, message) => {
    expect(() => parseCron(expression)).toThrow(message);
  });
});
