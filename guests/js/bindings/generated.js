let { TextEncoder, TextDecoder } = contentGlobal;

let repCnt = 1;
let repTable = new Map();

let [$memory, $realloc, $dealloc, $import_wasmbox_sandbox_tools_0_1_2$listTools, $import_wasmbox_sandbox_tools_0_1_2$call, $import_wasmbox_sandbox_tools_0_1_2$startCall, $import_wasmbox_sandbox_tools_0_1_2$awaitAny, $import_wasmbox_sandbox_files_0_1_2$read, $import_wasmbox_sandbox_files_0_1_2$write, $import_wasmbox_sandbox_files_0_1_2$readDir, $import_wasmbox_sandbox_files_0_1_2$stat, $import_wasmbox_sandbox_files_0_1_2$remove, $import_wasmbox_sandbox_files_0_1_2$mkdir, $import_wasmbox_sandbox_files_0_1_2$rename] = $bindings;
delete globalThis.$bindings;



let dv = new DataView(new ArrayBuffer());
const dataView = mem => dv.buffer === mem.buffer ? dv : dv = new DataView(mem.buffer);

function toUint32(val) {
  
  return val >>> 0;
}


function _isValidNumericPrimitive(ty, v) {
  if (v === undefined || v === null) { return false; }
  switch (ty) {
    case 'bool':
    return v === 0 || v === 1;
    break;
    case 'u8':
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 255;
    break;
    case 's8':
    return typeof v === 'number' && Number.isInteger(v) && v >= -128 && v <= 127;
    break;
    case 'u16':
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 65535;
    break;
    case 's16':
    return typeof v === 'number' && Number.isInteger(v) && v >= -32768 && v <= 32767;
    case 'u32':
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 4_294_967_295;
    case 's32':
    return typeof v === 'number' && Number.isInteger(v) && v >= -2_147_483_648 && v <= 2_147_483_647;
    case 'u64':
    return typeof v === 'bigint' && v >= 0 && v <= 18_446_744_073_709_551_615n;
    case 's64':
    return typeof v === 'bigint' && v >= -9223372036854775808n && v <= 9223372036854775807n;
    break;
    case 'f32':
    case 'f64': return typeof v === 'number';
    default:
    return false;
  }
  return true;
}

function _requireValidNumericPrimitive(ty, v) {
  if (v === undefined  || v === null || !_isValidNumericPrimitive(ty, v)) {
    throw new TypeError(`invalid ${ty} value [${v}]`);
  }
  return true;
}
const TEXT_DECODER_UTF8 = new TextDecoder();
const TEXT_ENCODER_UTF8 = new TextEncoder();

function _utf8AllocateAndEncode(s, realloc, memory) {
  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
  if (s.length === 0) { return { ptr: 1, len: 0 }; }
  // Compute the exact allocation size up front. Some older preview1
  // adapters only support an initial allocation, not a subsequent shrink.
  let len = 0;
  let codepoints = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    codepoints++;
    if (ch < 0x80) { len += 1; }
    else if (ch < 0x800) { len += 2; }
    else if (ch >= 0xd800 && ch <= 0xdbff &&
    i + 1 < s.length &&
    (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      len += 4;
      i++;
    } else { len += 3; }
  }
  const ptr = realloc(0, 0, 1, len);
  const { read, written } = TEXT_ENCODER_UTF8.encodeInto(
  s,
  new Uint8Array(memory.buffer, ptr, len),
  );
  if (read !== s.length || written !== len) {
    throw new Error('failed to encode whole string');
  }
  const res = { ptr, len, codepoints };
  return res;
}


const _debugLog = (...args) => {
  if (!globalThis?.process?.env?.JCO_DEBUG) { return; }
  console.debug(...args);
};

class ComponentError extends Error {
  constructor (value) {
    const enumerable = typeof value !== 'string';
    super(enumerable ? `${String(value)} (see error.payload)` : value);
    Object.defineProperty(this, 'payload', { value, enumerable });
  }
}

const hasOwnProperty = Object.prototype.hasOwnProperty;

function getErrorPayload(e) {
  if (e && hasOwnProperty.call(e, 'payload')) return e.payload;
  if (e instanceof Error) throw e;
  return e;
}

function import_wasmbox_sandbox_tools_0_1_2$listTools() {
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'list-tools',
    paramCount: 0,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_tools_0_1_2$listTools();
  var len3 = dataView($memory).getUint32(ret + 4, true);
  var base3 = dataView($memory).getUint32(ret + 0, true);
  if (base3 % 4 !== 0) throw new TypeError(`list pointer [${base3}] is not aligned to 4`);
  var result3 = [];
  for (let i = 0; i < len3; i++) {
    const base = base3 + i * 24;
    var ptr0 = dataView($memory).getUint32(base + 0, true);
    var len0 = dataView($memory).getUint32(base + 4, true);
    var result0 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr0, len0));
    if (len0 !== 0) $dealloc(ptr0, len0, 1);
    var ptr1 = dataView($memory).getUint32(base + 8, true);
    var len1 = dataView($memory).getUint32(base + 12, true);
    var result1 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr1, len1));
    if (len1 !== 0) $dealloc(ptr1, len1, 1);
    var ptr2 = dataView($memory).getUint32(base + 16, true);
    var len2 = dataView($memory).getUint32(base + 20, true);
    var result2 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr2, len2));
    if (len2 !== 0) $dealloc(ptr2, len2, 1);
    result3.push({
      name: result0,
      description: result1,
      argsSchema: result2,
    });
  }
  if (len3 !== 0) $dealloc(base3, len3 * 24, 4);
  _debugLog('[Instruction::Return]', {
    funcName: 'list-tools',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = result3;
  $dealloc(ret);
  return retCopy;
}

function import_wasmbox_sandbox_tools_0_1_2$call(arg0, arg1) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  
  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);
  var ptr1= encodeRes.ptr;
  var len1 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'call',
    paramCount: 4,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_tools_0_1_2$call(ptr0, len0, ptr1, len1);
  let variant9;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let variant8;
    switch (dataView($memory).getUint8(ret + 4, true)) {
      case 0: {
        var ptr3 = dataView($memory).getUint32(ret + 8, true);
        var len3 = dataView($memory).getUint32(ret + 12, true);
        var result3 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr3, len3));
        if (len3 !== 0) $dealloc(ptr3, len3, 1);
        variant8= {
          tag: 'denied',
          val: result3
        };
        break;
      }
      case 1: {
        var ptr4 = dataView($memory).getUint32(ret + 8, true);
        var len4 = dataView($memory).getUint32(ret + 12, true);
        var result4 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr4, len4));
        if (len4 !== 0) $dealloc(ptr4, len4, 1);
        variant8= {
          tag: 'budget-exhausted',
          val: result4
        };
        break;
      }
      case 2: {
        var ptr5 = dataView($memory).getUint32(ret + 8, true);
        var len5 = dataView($memory).getUint32(ret + 12, true);
        var result5 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr5, len5));
        if (len5 !== 0) $dealloc(ptr5, len5, 1);
        variant8= {
          tag: 'invalid-args',
          val: result5
        };
        break;
      }
      case 3: {
        var ptr6 = dataView($memory).getUint32(ret + 8, true);
        var len6 = dataView($memory).getUint32(ret + 12, true);
        var result6 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr6, len6));
        if (len6 !== 0) $dealloc(ptr6, len6, 1);
        variant8= {
          tag: 'failed',
          val: result6
        };
        break;
      }
      case 4: {
        var ptr7 = dataView($memory).getUint32(ret + 8, true);
        var len7 = dataView($memory).getUint32(ret + 12, true);
        var result7 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr7, len7));
        if (len7 !== 0) $dealloc(ptr7, len7, 1);
        variant8= {
          tag: 'timeout',
          val: result7
        };
        break;
      }
    }
    variant9= {
      tag: 'err',
      val: variant8
    };
  } else {
    var ptr2 = dataView($memory).getUint32(ret + 4, true);
    var len2 = dataView($memory).getUint32(ret + 8, true);
    var result2 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr2, len2));
    if (len2 !== 0) $dealloc(ptr2, len2, 1);
    variant9= {
      tag: 'ok',
      val: result2
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'call',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant9;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_tools_0_1_2$startCall(arg0, arg1) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  
  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);
  var ptr1= encodeRes.ptr;
  var len1 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'start-call',
    paramCount: 4,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_tools_0_1_2$startCall(ptr0, len0, ptr1, len1);
  let variant8;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let variant7;
    switch (dataView($memory).getUint8(ret + 4, true)) {
      case 0: {
        var ptr2 = dataView($memory).getUint32(ret + 8, true);
        var len2 = dataView($memory).getUint32(ret + 12, true);
        var result2 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr2, len2));
        if (len2 !== 0) $dealloc(ptr2, len2, 1);
        variant7= {
          tag: 'denied',
          val: result2
        };
        break;
      }
      case 1: {
        var ptr3 = dataView($memory).getUint32(ret + 8, true);
        var len3 = dataView($memory).getUint32(ret + 12, true);
        var result3 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr3, len3));
        if (len3 !== 0) $dealloc(ptr3, len3, 1);
        variant7= {
          tag: 'budget-exhausted',
          val: result3
        };
        break;
      }
      case 2: {
        var ptr4 = dataView($memory).getUint32(ret + 8, true);
        var len4 = dataView($memory).getUint32(ret + 12, true);
        var result4 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr4, len4));
        if (len4 !== 0) $dealloc(ptr4, len4, 1);
        variant7= {
          tag: 'invalid-args',
          val: result4
        };
        break;
      }
      case 3: {
        var ptr5 = dataView($memory).getUint32(ret + 8, true);
        var len5 = dataView($memory).getUint32(ret + 12, true);
        var result5 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr5, len5));
        if (len5 !== 0) $dealloc(ptr5, len5, 1);
        variant7= {
          tag: 'failed',
          val: result5
        };
        break;
      }
      case 4: {
        var ptr6 = dataView($memory).getUint32(ret + 8, true);
        var len6 = dataView($memory).getUint32(ret + 12, true);
        var result6 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr6, len6));
        if (len6 !== 0) $dealloc(ptr6, len6, 1);
        variant7= {
          tag: 'timeout',
          val: result6
        };
        break;
      }
    }
    variant8= {
      tag: 'err',
      val: variant7
    };
  } else {
    variant8= {
      tag: 'ok',
      val: dataView($memory).getInt32(ret + 4, true) >>> 0
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'start-call',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant8;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_tools_0_1_2$awaitAny(arg0) {
  var variant0 = arg0;
  let variant0_0;
  let variant0_1;
  if (variant0 === null || variant0=== undefined) {
    variant0_0 = 0;
    variant0_1 = 0;
  } else {
    const e = variant0;
    variant0_0 = 1;
    variant0_1 = toUint32(e);
  }
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'await-any',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_tools_0_1_2$awaitAny(variant0_0, variant0_1);
  var len9 = dataView($memory).getUint32(ret + 4, true);
  var base9 = dataView($memory).getUint32(ret + 0, true);
  if (base9 % 4 !== 0) throw new TypeError(`list pointer [${base9}] is not aligned to 4`);
  var result9 = [];
  for (let i = 0; i < len9; i++) {
    const base = base9 + i * 20;
    let variant8;
    if (dataView($memory).getUint8(base + 4, true)) {
      let variant7;
      switch (dataView($memory).getUint8(base + 8, true)) {
        case 0: {
          var ptr2 = dataView($memory).getUint32(base + 12, true);
          var len2 = dataView($memory).getUint32(base + 16, true);
          var result2 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr2, len2));
          if (len2 !== 0) $dealloc(ptr2, len2, 1);
          variant7= {
            tag: 'denied',
            val: result2
          };
          break;
        }
        case 1: {
          var ptr3 = dataView($memory).getUint32(base + 12, true);
          var len3 = dataView($memory).getUint32(base + 16, true);
          var result3 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr3, len3));
          if (len3 !== 0) $dealloc(ptr3, len3, 1);
          variant7= {
            tag: 'budget-exhausted',
            val: result3
          };
          break;
        }
        case 2: {
          var ptr4 = dataView($memory).getUint32(base + 12, true);
          var len4 = dataView($memory).getUint32(base + 16, true);
          var result4 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr4, len4));
          if (len4 !== 0) $dealloc(ptr4, len4, 1);
          variant7= {
            tag: 'invalid-args',
            val: result4
          };
          break;
        }
        case 3: {
          var ptr5 = dataView($memory).getUint32(base + 12, true);
          var len5 = dataView($memory).getUint32(base + 16, true);
          var result5 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr5, len5));
          if (len5 !== 0) $dealloc(ptr5, len5, 1);
          variant7= {
            tag: 'failed',
            val: result5
          };
          break;
        }
        case 4: {
          var ptr6 = dataView($memory).getUint32(base + 12, true);
          var len6 = dataView($memory).getUint32(base + 16, true);
          var result6 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr6, len6));
          if (len6 !== 0) $dealloc(ptr6, len6, 1);
          variant7= {
            tag: 'timeout',
            val: result6
          };
          break;
        }
      }
      variant8= {
        tag: 'err',
        val: variant7
      };
    } else {
      var ptr1 = dataView($memory).getUint32(base + 8, true);
      var len1 = dataView($memory).getUint32(base + 12, true);
      var result1 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr1, len1));
      if (len1 !== 0) $dealloc(ptr1, len1, 1);
      variant8= {
        tag: 'ok',
        val: result1
      };
    }
    result9.push({
      id: dataView($memory).getInt32(base + 0, true) >>> 0,
      answer: variant8,
    });
  }
  if (len9 !== 0) $dealloc(base9, len9 * 20, 4);
  _debugLog('[Instruction::Return]', {
    funcName: 'await-any',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = result9;
  $dealloc(ret);
  return retCopy;
}

function import_wasmbox_sandbox_files_0_1_2$read(arg0) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'read',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$read(ptr0, len0);
  let variant3;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum2;
    switch (dataView($memory).getUint8(ret + 4, true)) {
      case 0: {
        enum2 = 'no-entry';
        break;
      }
      case 1: {
        enum2 = 'exists';
        break;
      }
      case 2: {
        enum2 = 'not-directory';
        break;
      }
      case 3: {
        enum2 = 'is-directory';
        break;
      }
      case 4: {
        enum2 = 'not-empty';
        break;
      }
      case 5: {
        enum2 = 'read-only';
        break;
      }
      case 6: {
        enum2 = 'not-permitted';
        break;
      }
      case 7: {
        enum2 = 'invalid';
        break;
      }
      case 8: {
        enum2 = 'name-too-long';
        break;
      }
      case 9: {
        enum2 = 'no-space';
        break;
      }
      case 10: {
        enum2 = 'too-large';
        break;
      }
    }
    variant3= {
      tag: 'err',
      val: enum2
    };
  } else {
    var ptr1 = dataView($memory).getUint32(ret + 4, true);
    var len1 = dataView($memory).getUint32(ret + 8, true);
    if (ptr1 % 1 !== 0) throw new TypeError(`list pointer [${ptr1}] is not aligned to 1`);
    var result1 = new Uint8Array($memory.buffer.slice(ptr1, ptr1 + len1 * 1));
    if (len1 !== 0) $dealloc(ptr1, len1, 1);
    variant3= {
      tag: 'ok',
      val: result1
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'read',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant3;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$write(arg0, arg1, arg2) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  var val1 = arg1;
  var len1 = Array.isArray(val1) ? val1.length : val1.byteLength;
  var ptr1 = $realloc(0, 0, 1, len1 * 1);
  
  let valData1;
  const valLenBytes1 = len1 * 1;
  if (Array.isArray(val1)) {
    // Regular array likely containing numbers, write values to memory
    let offset = 0;
    const dv1 = new DataView($memory.buffer);
    for (const v of val1) {
      _requireValidNumericPrimitive.bind(null, 'u8')(v);
      dv1.setUint8(ptr1+ offset, v, true);
      offset += 1;
    }
  } else {
    // TypedArray / ArrayBuffer-like, direct copy
    valData1 = new Uint8Array(val1.buffer || val1, val1.byteOffset, valLenBytes1);
    const out1 = new Uint8Array($memory.buffer, ptr1, valLenBytes1);
    out1.set(valData1);
  }
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'write',
    paramCount: 5,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$write(ptr0, len0, ptr1, len1, arg2 ? 1 : 0);
  let variant3;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum2;
    switch (dataView($memory).getUint8(ret + 1, true)) {
      case 0: {
        enum2 = 'no-entry';
        break;
      }
      case 1: {
        enum2 = 'exists';
        break;
      }
      case 2: {
        enum2 = 'not-directory';
        break;
      }
      case 3: {
        enum2 = 'is-directory';
        break;
      }
      case 4: {
        enum2 = 'not-empty';
        break;
      }
      case 5: {
        enum2 = 'read-only';
        break;
      }
      case 6: {
        enum2 = 'not-permitted';
        break;
      }
      case 7: {
        enum2 = 'invalid';
        break;
      }
      case 8: {
        enum2 = 'name-too-long';
        break;
      }
      case 9: {
        enum2 = 'no-space';
        break;
      }
      case 10: {
        enum2 = 'too-large';
        break;
      }
    }
    variant3= {
      tag: 'err',
      val: enum2
    };
  } else {
    variant3= {
      tag: 'ok',
      val: undefined
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'write',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant3;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$readDir(arg0) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'read-dir',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$readDir(ptr0, len0);
  let variant5;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum4;
    switch (dataView($memory).getUint8(ret + 4, true)) {
      case 0: {
        enum4 = 'no-entry';
        break;
      }
      case 1: {
        enum4 = 'exists';
        break;
      }
      case 2: {
        enum4 = 'not-directory';
        break;
      }
      case 3: {
        enum4 = 'is-directory';
        break;
      }
      case 4: {
        enum4 = 'not-empty';
        break;
      }
      case 5: {
        enum4 = 'read-only';
        break;
      }
      case 6: {
        enum4 = 'not-permitted';
        break;
      }
      case 7: {
        enum4 = 'invalid';
        break;
      }
      case 8: {
        enum4 = 'name-too-long';
        break;
      }
      case 9: {
        enum4 = 'no-space';
        break;
      }
      case 10: {
        enum4 = 'too-large';
        break;
      }
    }
    variant5= {
      tag: 'err',
      val: enum4
    };
  } else {
    var len3 = dataView($memory).getUint32(ret + 8, true);
    var base3 = dataView($memory).getUint32(ret + 4, true);
    if (base3 % 4 !== 0) throw new TypeError(`list pointer [${base3}] is not aligned to 4`);
    var result3 = [];
    for (let i = 0; i < len3; i++) {
      const base = base3 + i * 12;
      var ptr1 = dataView($memory).getUint32(base + 0, true);
      var len1 = dataView($memory).getUint32(base + 4, true);
      var result1 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr1, len1));
      if (len1 !== 0) $dealloc(ptr1, len1, 1);
      let enum2;
      switch (dataView($memory).getUint8(base + 8, true)) {
        case 0: {
          enum2 = 'file';
          break;
        }
        case 1: {
          enum2 = 'directory';
          break;
        }
      }
      result3.push({
        name: result1,
        kind: enum2,
      });
    }
    if (len3 !== 0) $dealloc(base3, len3 * 12, 4);
    variant5= {
      tag: 'ok',
      val: result3
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'read-dir',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant5;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$stat(arg0) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'stat',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$stat(ptr0, len0);
  let variant3;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum2;
    switch (dataView($memory).getUint8(ret + 8, true)) {
      case 0: {
        enum2 = 'no-entry';
        break;
      }
      case 1: {
        enum2 = 'exists';
        break;
      }
      case 2: {
        enum2 = 'not-directory';
        break;
      }
      case 3: {
        enum2 = 'is-directory';
        break;
      }
      case 4: {
        enum2 = 'not-empty';
        break;
      }
      case 5: {
        enum2 = 'read-only';
        break;
      }
      case 6: {
        enum2 = 'not-permitted';
        break;
      }
      case 7: {
        enum2 = 'invalid';
        break;
      }
      case 8: {
        enum2 = 'name-too-long';
        break;
      }
      case 9: {
        enum2 = 'no-space';
        break;
      }
      case 10: {
        enum2 = 'too-large';
        break;
      }
    }
    variant3= {
      tag: 'err',
      val: enum2
    };
  } else {
    let enum1;
    switch (dataView($memory).getUint8(ret + 8, true)) {
      case 0: {
        enum1 = 'file';
        break;
      }
      case 1: {
        enum1 = 'directory';
        break;
      }
    }
    variant3= {
      tag: 'ok',
      val: {
        kind: enum1,
        size: BigInt.asUintN(64, BigInt(dataView($memory).getBigInt64(ret + 16, true))),
        modifiedNs: BigInt.asUintN(64, BigInt(dataView($memory).getBigInt64(ret + 24, true))),
        accessedNs: BigInt.asUintN(64, BigInt(dataView($memory).getBigInt64(ret + 32, true))),
      }
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'stat',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant3;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$remove(arg0) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'remove',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$remove(ptr0, len0);
  let variant2;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum1;
    switch (dataView($memory).getUint8(ret + 1, true)) {
      case 0: {
        enum1 = 'no-entry';
        break;
      }
      case 1: {
        enum1 = 'exists';
        break;
      }
      case 2: {
        enum1 = 'not-directory';
        break;
      }
      case 3: {
        enum1 = 'is-directory';
        break;
      }
      case 4: {
        enum1 = 'not-empty';
        break;
      }
      case 5: {
        enum1 = 'read-only';
        break;
      }
      case 6: {
        enum1 = 'not-permitted';
        break;
      }
      case 7: {
        enum1 = 'invalid';
        break;
      }
      case 8: {
        enum1 = 'name-too-long';
        break;
      }
      case 9: {
        enum1 = 'no-space';
        break;
      }
      case 10: {
        enum1 = 'too-large';
        break;
      }
    }
    variant2= {
      tag: 'err',
      val: enum1
    };
  } else {
    variant2= {
      tag: 'ok',
      val: undefined
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'remove',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant2;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$mkdir(arg0) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'mkdir',
    paramCount: 2,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$mkdir(ptr0, len0);
  let variant2;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum1;
    switch (dataView($memory).getUint8(ret + 1, true)) {
      case 0: {
        enum1 = 'no-entry';
        break;
      }
      case 1: {
        enum1 = 'exists';
        break;
      }
      case 2: {
        enum1 = 'not-directory';
        break;
      }
      case 3: {
        enum1 = 'is-directory';
        break;
      }
      case 4: {
        enum1 = 'not-empty';
        break;
      }
      case 5: {
        enum1 = 'read-only';
        break;
      }
      case 6: {
        enum1 = 'not-permitted';
        break;
      }
      case 7: {
        enum1 = 'invalid';
        break;
      }
      case 8: {
        enum1 = 'name-too-long';
        break;
      }
      case 9: {
        enum1 = 'no-space';
        break;
      }
      case 10: {
        enum1 = 'too-large';
        break;
      }
    }
    variant2= {
      tag: 'err',
      val: enum1
    };
  } else {
    variant2= {
      tag: 'ok',
      val: undefined
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'mkdir',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant2;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

function import_wasmbox_sandbox_files_0_1_2$rename(arg0, arg1) {
  
  var encodeRes = _utf8AllocateAndEncode(arg0, $realloc, $memory);
  var ptr0= encodeRes.ptr;
  var len0 = encodeRes.len;
  
  
  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);
  var ptr1= encodeRes.ptr;
  var len1 = encodeRes.len;
  
  _debugLog('[Instruction::CallWasm] enter', {
    funcName: 'rename',
    paramCount: 4,
    async: false,
    postReturn: true,
  });
  let ret;
  
  ret = $import_wasmbox_sandbox_files_0_1_2$rename(ptr0, len0, ptr1, len1);
  let variant3;
  if (dataView($memory).getUint8(ret + 0, true)) {
    let enum2;
    switch (dataView($memory).getUint8(ret + 1, true)) {
      case 0: {
        enum2 = 'no-entry';
        break;
      }
      case 1: {
        enum2 = 'exists';
        break;
      }
      case 2: {
        enum2 = 'not-directory';
        break;
      }
      case 3: {
        enum2 = 'is-directory';
        break;
      }
      case 4: {
        enum2 = 'not-empty';
        break;
      }
      case 5: {
        enum2 = 'read-only';
        break;
      }
      case 6: {
        enum2 = 'not-permitted';
        break;
      }
      case 7: {
        enum2 = 'invalid';
        break;
      }
      case 8: {
        enum2 = 'name-too-long';
        break;
      }
      case 9: {
        enum2 = 'no-space';
        break;
      }
      case 10: {
        enum2 = 'too-large';
        break;
      }
    }
    variant3= {
      tag: 'err',
      val: enum2
    };
  } else {
    variant3= {
      tag: 'ok',
      val: undefined
    };
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'rename',
    paramCount: 1,
    async: false,
    postReturn: true
  });
  const retCopy = variant3;
  $dealloc(ret);
  
  
  if (typeof retCopy === 'object' && retCopy.tag === 'err') {
    throw new ComponentError(retCopy.val);
  }
  return retCopy.val;
  
}

async function export_runner_0_1_2$run(arg0, arg1, arg2, arg3, arg4) {
  var ptr0 = arg0;
  var len0 = arg1;
  var result0 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr0, len0));
  if (len0 !== 0) $dealloc(ptr0, len0, 1);
  var ptr1 = arg2;
  var len1 = arg3;
  var result1 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr1, len1));
  if (len1 !== 0) $dealloc(ptr1, len1, 1);
  _debugLog(' [Instruction::CallInterface] (sync, @ enter)');
  let ret;
  
  try {
    const hostRet2 = await runner012Run(result0, result1);
    ret = hostRet2 !== null && typeof hostRet2 === 'object' && (hostRet2.tag === 'ok' || hostRet2.tag === 'err')
    ? hostRet2
    : { tag: 'ok', val: hostRet2};
  } catch (e) {
    
    ret = { tag: 'err', val: getErrorPayload(e) };
  }
  
  var variant14 = ret;
  switch (variant14.tag) {
    case 'ok': {
      const e = variant14.val;
      dataView($memory).setInt8(arg4 + 0, 0, true);
      
      var encodeRes = _utf8AllocateAndEncode(e, $realloc, $memory);
      var ptr3= encodeRes.ptr;
      var len3 = encodeRes.len;
      
      dataView($memory).setUint32(arg4 + 8, len3, true);
      dataView($memory).setUint32(arg4 + 4, ptr3, true);
      
      break;
    }
    case 'err': {
      const e = variant14.val;
      dataView($memory).setInt8(arg4 + 0, 1, true);
      var variant13 = e;
      switch (variant13.tag) {
        case 'syntax': {
          const e = variant13.val;
          dataView($memory).setInt8(arg4 + 4, 0, true);
          var {kind: v4_0, message: v4_1, traceback: v4_2 } = e;
          
          var encodeRes = _utf8AllocateAndEncode(v4_0, $realloc, $memory);
          var ptr5= encodeRes.ptr;
          var len5 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 12, len5, true);
          dataView($memory).setUint32(arg4 + 8, ptr5, true);
          
          var encodeRes = _utf8AllocateAndEncode(v4_1, $realloc, $memory);
          var ptr6= encodeRes.ptr;
          var len6 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 20, len6, true);
          dataView($memory).setUint32(arg4 + 16, ptr6, true);
          
          var encodeRes = _utf8AllocateAndEncode(v4_2, $realloc, $memory);
          var ptr7= encodeRes.ptr;
          var len7 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 28, len7, true);
          dataView($memory).setUint32(arg4 + 24, ptr7, true);
          break;
        }
        case 'exception': {
          const e = variant13.val;
          dataView($memory).setInt8(arg4 + 4, 1, true);
          var {kind: v8_0, message: v8_1, traceback: v8_2 } = e;
          
          var encodeRes = _utf8AllocateAndEncode(v8_0, $realloc, $memory);
          var ptr9= encodeRes.ptr;
          var len9 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 12, len9, true);
          dataView($memory).setUint32(arg4 + 8, ptr9, true);
          
          var encodeRes = _utf8AllocateAndEncode(v8_1, $realloc, $memory);
          var ptr10= encodeRes.ptr;
          var len10 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 20, len10, true);
          dataView($memory).setUint32(arg4 + 16, ptr10, true);
          
          var encodeRes = _utf8AllocateAndEncode(v8_2, $realloc, $memory);
          var ptr11= encodeRes.ptr;
          var len11 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 28, len11, true);
          dataView($memory).setUint32(arg4 + 24, ptr11, true);
          break;
        }
        case 'contract': {
          const e = variant13.val;
          dataView($memory).setInt8(arg4 + 4, 2, true);
          
          var encodeRes = _utf8AllocateAndEncode(e, $realloc, $memory);
          var ptr12= encodeRes.ptr;
          var len12 = encodeRes.len;
          
          dataView($memory).setUint32(arg4 + 12, len12, true);
          dataView($memory).setUint32(arg4 + 8, ptr12, true);
          break;
        }
        default: {
          throw new TypeError(`invalid variant tag value \`${JSON.stringify(variant13.tag)}\` (received \`${variant13}\`) specified for \`RunError\``);
        }
      }
      
      break;
    }
    default: {
      _debugLog("ERROR: invalid value (expected result as object with 'tag' member)", { value: variant14, valueType: typeof variant14});
      throw new TypeError('invalid variant specified for result');
    }
  }
  _debugLog('[Instruction::Return]', {
    funcName: 'run',
    paramCount: 0,
    async: false,
    postReturn: false
  });
  return;
}


defineBuiltinModule('wasmbox:sandbox/files@0.1.2', {
  read: import_wasmbox_sandbox_files_0_1_2$read,
  write: import_wasmbox_sandbox_files_0_1_2$write,
  readDir: import_wasmbox_sandbox_files_0_1_2$readDir,
  stat: import_wasmbox_sandbox_files_0_1_2$stat,
  remove: import_wasmbox_sandbox_files_0_1_2$remove,
  mkdir: import_wasmbox_sandbox_files_0_1_2$mkdir,
  rename: import_wasmbox_sandbox_files_0_1_2$rename
});

defineBuiltinModule('wasmbox:sandbox/tools@0.1.2', {
  listTools: import_wasmbox_sandbox_tools_0_1_2$listTools,
  call: import_wasmbox_sandbox_tools_0_1_2$call,
  startCall: import_wasmbox_sandbox_tools_0_1_2$startCall,
  awaitAny: import_wasmbox_sandbox_tools_0_1_2$awaitAny
});
class BindingsError extends Error {
  constructor (path, type, helpContext, help) {
    super(`"${__sourceName}" does not export a "${path}" ${type} as expected by the world.${
      help ? `\n  Try defining it${helpContext}:\n${help.split('\n').map(ln => `  ${ln}`).join('\n')}` : ''}`);
    }
  }
  function getInterfaceExport (mod, exportNameOrAlias, exportId) {
    if (typeof mod[exportId] === 'object')
    return mod[exportId];
    if (exportNameOrAlias && typeof mod[exportNameOrAlias] === 'object')
    return mod[exportNameOrAlias];
    if (!exportNameOrAlias)
    throw new BindingsError(exportId, 'interface', ' by its qualified interface name', `const obj = {};
    
    export { obj as '${exportId}' }
    `);
    else
    throw new BindingsError(exportNameOrAlias, 'interface', exportId && exportNameOrAlias ? ' by its alias' : ' by name', `export const ${exportNameOrAlias} = {};`);
  }
  function verifyInterfaceFn (fn, exportName, ifaceProp, interfaceExportAlias) {
    if (typeof fn !== 'function') {
      if (!interfaceExportAlias)
      throw new BindingsError(exportName, `${ifaceProp} function`, ' on the exported interface object', `const obj = {
        ${ifaceProp} () {
          
        }
      };
      
      export { obj as '${exportName}' }
      `);
      else
      throw new BindingsError(exportName, `${ifaceProp} function`, ` on the interface alias "${interfaceExportAlias}"`, `export const ${interfaceExportAlias} = {
        ${ifaceProp} () {
          
        }
      };`);
    }
  }
  function verifyInterfaceResource (fn, exportName, ifaceProp, interfaceExportAlias) {
    if (typeof fn !== 'function') {
      if (!interfaceExportAlias)
      throw new BindingsError(exportName, `${ifaceProp} resource`, ' on the exported interface object', `const obj = {
        ${ifaceProp} () {
          
        }
      };
      
      export { obj as '${exportName}' }
      `);
      else
      throw new BindingsError(exportName, `${ifaceProp} resource`, ` on the interface alias "${interfaceExportAlias}"`, `export const ${interfaceExportAlias} = {
        ${ifaceProp} () {
          
        }
      };`);
    }
  }
  
  let runner012Run;
  let __sourceName;
  function bindExports(sourceName) {
    __sourceName = sourceName;
    let __iface;
    __iface = getInterfaceExport($source_mod, 'runner', 'wasmbox:sandbox/runner@0.1.2');
    runner012Run = __iface.run;
    verifyInterfaceFn(runner012Run, 'wasmbox:sandbox/runner@0.1.2', 'run', 'runner');
  }
  