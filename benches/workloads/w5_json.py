import json
items = [{"id": i, "name": f"item-{i}", "tags": ["a", "b"], "price": i * 0.5} for i in range(10_000)]
back = json.loads(json.dumps(items))
sum(d["id"] for d in back)
