// The same log parsing with the JS built-ins: RegExp, Date and Map.
const lines = []
for (let i = 0; i < 1000; i++) {
  const day = String(1 + (i % 28)).padStart(2, "0"), minute = String(i % 60).padStart(2, "0")
  lines.push(`2024-01-${day} 12:${minute} user${i % 7} GET /item/${i}`)
}
const pattern = /(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) (user\d+) GET \/item\/(\d+)/
const byUser = new Map()
let latest = new Date(Date.UTC(2000, 0, 1))
for (const line of lines) {
  const [, day, time, user] = pattern.exec(line)
  byUser.set(user, (byUser.get(user) ?? 0) + 1)
  const at = new Date(`${day}T${time}:00Z`)
  if (at > latest) latest = at
}
let top = null
for (const [user, n] of byUser) if (top === null || n > byUser.get(top)) top = user
return `${top} ${latest.toISOString().slice(0, 19)}`
