import collections, datetime, re
lines = [f"2024-01-{1 + i % 28:02d} 12:{i % 60:02d} user{i % 7} GET /item/{i}" for i in range(1000)]
pattern = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) (user\d+) GET /item/(\d+)")
by_user = collections.Counter()
latest = datetime.datetime(2000, 1, 1)
for line in lines:
    day, time, user, item = pattern.match(line).groups()
    by_user[user] += 1
    latest = max(latest, datetime.datetime.fromisoformat(f"{day}T{time}"))
f"{by_user.most_common(1)[0][0]} {latest.isoformat()}"
