const items = []
for (let i = 0; i < 10_000; i++) items.push({id: i, name: `item-${i}`, tags: ["a", "b"], price: i * 0.5})
const back = JSON.parse(JSON.stringify(items))
return back.reduce((sum, d) => sum + d.id, 0)
