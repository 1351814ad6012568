// Numbers are doubles, so past 2**53 the sum is rounded: the harness compares it approximately.
let s = 0
for (let i = 0; i < 1_000_000; i++) s += i * i
return s
