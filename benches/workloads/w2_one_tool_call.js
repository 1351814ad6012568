return await tools.add({a: 1, b: 2})
