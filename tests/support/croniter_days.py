"""croniter as an independent cron reference: for each six-field pattern on stdin (one per
line), prints one JSON line: the pattern's first fire on every UTC date of YEAR that has one,
as [["YYYY-MM-DD", "HH:MM:SS"], ...]. With implement_cron_bug, croniter's day rule is Vixie
cron's: day-of-month and day-of-week combine with AND when either starts with `*`.

Usage: python3 croniter_days.py YEAR < patterns
"""
import datetime
import json
import sys

from croniter import croniter


def main():
    year = int(sys.argv[1])
    for line in sys.stdin:
        expr = line.strip()
        if not expr:
            continue
        day = datetime.datetime(year, 1, 1)
        end = datetime.datetime(year + 1, 1, 1)
        fires = []
        it = croniter(expr, day - datetime.timedelta(seconds=1), second_at_beginning=True, implement_cron_bug=True)
        nxt = it.get_next(datetime.datetime)
        while nxt < end:
            fires.append([nxt.strftime("%Y-%m-%d"), nxt.strftime("%H:%M:%S")])
            # The next day's first fire: search from the end of this fire's day.
            start = datetime.datetime(nxt.year, nxt.month, nxt.day) + datetime.timedelta(days=1)
            it = croniter(expr, start - datetime.timedelta(seconds=1), second_at_beginning=True, implement_cron_bug=True)
            nxt = it.get_next(datetime.datetime)
        print(json.dumps({"expr": expr, "fires": fires}), flush=True)


if __name__ == "__main__":
    main()
