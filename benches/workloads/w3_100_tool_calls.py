t = 0
for i in range(100):
    t = tools.add(a=t, b=i)
t
