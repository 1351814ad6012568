// Runs inside the sandbox (the body of an async function): it reaches the world only
// through the tools it is allowed (`--allow`), here the two of tools.toml.
const [marathon, oven] = await Promise.all([
  tools.convert({value: 42.195, unit: "km", to: "mi"}),
  tools.convert({value: 180, unit: "C", to: "F"}),
]);
let checkedAt = null;
try {
  checkedAt = (await tools.now()).utc;
} catch (e) {
  if (!(e instanceof ToolDenied)) throw e;  // not in --allow
}
console.log(`a marathon is ${marathon.value.toFixed(1)} mi; 180 °C is ${oven.value.toFixed(0)} °F`);
return {marathon_mi: marathon.value, oven_f: oven.value, checked_at: checkedAt};
