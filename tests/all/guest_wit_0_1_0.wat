;; A guest built against WIT 0.1.0 (wit/sandbox.wit before the files interface): it
;; imports wasmbox:sandbox/tools@0.1.0 and exports wasmbox:sandbox/runner@0.1.0, as every
;; component built before 0.1.1 does. The core module below was written by hand; the rest
;; is what wit-component 0.259 (jco's `componentEmbed` and `componentNew`, with 0.1.0's
;; sandbox.wit) wraps around it, printed. tests/all/wit_versions.rs runs it.
(component
  (type $ty-wasmbox:sandbox/tools@0.1.0 (;0;)
    (instance
      (type (;0;) (variant (case "denied" string) (case "budget-exhausted" string) (case "invalid-args" string) (case "failed" string) (case "timeout" string)))
      (export (;1;) "call-error" (type (eq 0)))
      (type (;2;) (result string (error 1)))
      (type (;3;) (func (param "name" string) (param "args-json" string) (result 2)))
      (export (;0;) "call" (func (type 3)))
    )
  )
  (import "wasmbox:sandbox/tools@0.1.0" (instance $wasmbox:sandbox/tools@0.1.0 (;0;) (type $ty-wasmbox:sandbox/tools@0.1.0)))
  (core module $main (;0;)
    (import "wasmbox:sandbox/tools@0.1.0" "call" (func $call (param i32 i32 i32 i32 i32)))
    (memory (export "memory") 1)
    (global $heap (mut i32) (i32.const 1024))
    ;; A bump allocator: the instance lives for one run.
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get 2))))
      (global.set $heap (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    (data (i32.const 16) "tool refused")
    ;; run(code, input-json) = tools.call(code, input-json): the tool's result as the
    ;; run's value, or run-error::contract("tool refused").
    (func (export "wasmbox:sandbox/runner@0.1.0#run") (param i32 i32 i32 i32) (result i32)
      ;; call's result at 128: tag (0 ok) at +0, ok's string at +4/+8
      (call $call (local.get 0) (local.get 1) (local.get 2) (local.get 3) (i32.const 128))
      ;; run's result at 256: tag at +0; ok's string at +4/+8; err's run-error tag at
      ;; +4 (2: contract) and its string at +8/+12
      (if (i32.eqz (i32.load8_u (i32.const 128)))
        (then
          (i32.store8 (i32.const 256) (i32.const 0))
          (i32.store (i32.const 260) (i32.load (i32.const 132)))
          (i32.store (i32.const 264) (i32.load (i32.const 136))))
        (else
          (i32.store8 (i32.const 256) (i32.const 1))
          (i32.store8 (i32.const 260) (i32.const 2))
          (i32.store (i32.const 264) (i32.const 16))
          (i32.store (i32.const 268) (i32.const 12))))
      (i32.const 256))
  )
  (core module $wit-component-shim-module (;1;)
    (type (;0;) (func (param i32 i32 i32 i32 i32)))
    (table (;0;) 1 1 funcref)
    (export "0" (func 0))
    (export "$imports" (table 0))
    (func (;0;) (type 0) (param i32 i32 i32 i32 i32)
      local.get 0
      local.get 1
      local.get 2
      local.get 3
      local.get 4
      i32.const 0
      call_indirect (type 0)
    )
    (@producers
      (processed-by "wit-component" "0.259.0")
    )
  )
  (core instance $wit-component-shim-instance (;0;) (instantiate $wit-component-shim-module))
  (type (;1;) (record (field "kind" string) (field "message" string) (field "traceback" string)))
  (type (;2;) (variant (case "syntax" 1) (case "exception" 1) (case "contract" string)))
  (alias core export $wit-component-shim-instance "0" (core func $indirect-wasmbox:sandbox/tools@0.1.0-call (;0;)))
  (core instance $wasmbox:sandbox/tools@0.1.0 (;1;)
    (export "call" (func $indirect-wasmbox:sandbox/tools@0.1.0-call))
  )
  (core instance $main (;2;) (instantiate $main
      (with "wasmbox:sandbox/tools@0.1.0" (instance $wasmbox:sandbox/tools@0.1.0))
    )
  )
  (alias core export $main "memory" (core memory $memory (;0;)))
  (core module $wit-component-fixup (;2;)
    (type (;0;) (func (param i32 i32 i32 i32 i32)))
    (import "actual" "0" (func (;0;) (type 0)))
    (import "shim" "$imports" (table (;0;) 1 1 funcref))
    (elem (;0;) (i32.const 0) func 0)
    (@producers
      (processed-by "wit-component" "0.259.0")
    )
  )
  (alias export $wasmbox:sandbox/tools@0.1.0 "call" (func $call (;0;)))
  (alias core export $main "cabi_realloc" (core func $cabi_realloc (;1;)))
  (core func $"#core-func2 indirect-wasmbox:sandbox/tools@0.1.0-call" (@name "indirect-wasmbox:sandbox/tools@0.1.0-call") (;2;) (canon lower (func $call) (memory $memory) (realloc $cabi_realloc) string-encoding=utf8))
  (core instance $actual (;3;)
    (export "0" (func $"#core-func2 indirect-wasmbox:sandbox/tools@0.1.0-call"))
  )
  (core instance $fixup (;4;) (instantiate $wit-component-fixup
      (with "actual" (instance $actual))
      (with "shim" (instance $wit-component-shim-instance))
    )
  )
  (type (;3;) (result string (error 2)))
  (type (;4;) (func (param "code" string) (param "input-json" string) (result 3)))
  (alias core export $main "wasmbox:sandbox/runner@0.1.0#run" (core func $wasmbox:sandbox/runner@0.1.0#run (;3;)))
  (func $run (;1;) (type 4) (canon lift (core func $wasmbox:sandbox/runner@0.1.0#run) (memory $memory) (realloc $cabi_realloc) string-encoding=utf8))
  (component $wasmbox:sandbox/runner@0.1.0-shim-component (;0;)
    (type (;0;) (record (field "kind" string) (field "message" string) (field "traceback" string)))
    (import "import-type-guest-exception" (type (;1;) (eq 0)))
    (type (;2;) (variant (case "syntax" 1) (case "exception" 1) (case "contract" string)))
    (import "import-type-run-error" (type (;3;) (eq 2)))
    (type (;4;) (result string (error 3)))
    (type (;5;) (func (param "code" string) (param "input-json" string) (result 4)))
    (import "import-func-run" (func (;0;) (type 5)))
    (type (;6;) (record (field "kind" string) (field "message" string) (field "traceback" string)))
    (export (;7;) "guest-exception" (type 6))
    (type (;8;) (variant (case "syntax" 7) (case "exception" 7) (case "contract" string)))
    (export (;9;) "run-error" (type 8))
    (type (;10;) (result string (error 9)))
    (type (;11;) (func (param "code" string) (param "input-json" string) (result 10)))
    (export (;1;) "run" (func 0) (func (type 11)))
  )
  (instance $wasmbox:sandbox/runner@0.1.0-shim-instance (;1;) (instantiate $wasmbox:sandbox/runner@0.1.0-shim-component
      (with "import-func-run" (func $run))
      (with "import-type-guest-exception" (type 1))
      (with "import-type-run-error" (type 2))
    )
  )
  (export $wasmbox:sandbox/runner@0.1.0 (;2;) "wasmbox:sandbox/runner@0.1.0" (instance $wasmbox:sandbox/runner@0.1.0-shim-instance))
  (@producers
    (processed-by "wit-component" "0.259.0")
  )
)
