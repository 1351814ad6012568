let t = 0
for (let i = 0; i < 100; i++) t = await tools.add({a: t, b: i})
return t
