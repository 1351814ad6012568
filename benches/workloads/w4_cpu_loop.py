sum(i * i for i in range(1_000_000))
