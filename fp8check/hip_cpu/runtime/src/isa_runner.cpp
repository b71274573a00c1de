// Runs the text of a rewritten inline-asm statement on emulated registers: each operand of the statement
// is one register (its bytes), each instruction one call into hipcpu/isa.hpp. An instruction this file
// does not know stops the run naming it, when it is executed (never at build time).
#include "hipcpu/device.hpp"
#include "hipcpu/isa.hpp"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <deque>
#include <vector>

#if defined(HIPCPU_GFX942)
static constexpr hipcpu::isa::Fp8 kFp8 = hipcpu::isa::Fp8::e4m3fnuz;
#else
static constexpr hipcpu::isa::Fp8 kFp8 = hipcpu::isa::Fp8::e4m3fn;
#endif

extern "C" const uint64_t* hipcpu_instruction_counts(void);

namespace {

using hipcpu::isa::AsmOperand;

enum Kind { max3, min3, med3, pk_mul, cvt_pk_fp8, max2, min2, mul, unknown, bad };

// One operand of a parsed instruction: an asm operand index (or a name resolved per call) or a literal.
struct Arg
{
    int index = -1;
    std::string name;
    float literal = 0.0f;
    bool abs = false, neg = false;
};

struct Insn
{
    Kind kind = unknown;
    std::string text;
    std::vector<Arg> args;
    bool word_select = false;
};

std::string trim(std::string s)
{
    size_t a = 0, b = s.size();
    while(a < b && isspace((unsigned char)s[a])) ++a;
    while(b > a && isspace((unsigned char)s[b - 1])) --b;
    return s.substr(a, b - a);
}

bool parse_arg(std::string token, Arg& arg)
{
    token = trim(token);
    if(!token.empty() && token[0] == '-') arg.neg = true, token = trim(token.substr(1));
    if(token.size() >= 2 && token.front() == '|' && token.back() == '|')
        arg.abs = true, token = trim(token.substr(1, token.size() - 2));
    if(!token.empty() && token[0] == '%')
    {
        if(token.size() > 2 && token[1] == '[' && token.back() == ']')
            arg.name = token.substr(2, token.size() - 3);
        else
        {
            char* end = nullptr;
            arg.index = (int)strtol(token.c_str() + 1, &end, 10);
            if(end == token.c_str() + 1 || *end) return false;
        }
        return true;
    }
    char* end = nullptr;
    arg.literal = strtof(token.c_str(), &end);
    return !token.empty() && !*end;
}

Insn parse_line(const std::string& line)
{
    Insn insn;
    insn.text = line;
    size_t space = line.find_first_of(" \t");
    const std::string mnemonic = line.substr(0, space);
    static const struct { const char* name; Kind kind; size_t args; } known[] = {
        {"v_max3_f32", max3, 4}, {"v_min3_f32", min3, 4}, {"v_med3_f32", med3, 4},
        {"v_pk_mul_f32", pk_mul, 3}, {"v_cvt_pk_fp8_f32", cvt_pk_fp8, 3},
        {"v_max_f32", max2, 3}, {"v_min_f32", min2, 3}, {"v_mul_f32", mul, 3},
    };
    size_t nargs = 0;
    for(const auto& k : known)
        if(mnemonic == k.name) insn.kind = k.kind, nargs = k.args;
    if(insn.kind == unknown) { insn.text = mnemonic; return insn; }
    std::vector<std::string> parts;
    std::string cur, rest = space == std::string::npos ? "" : line.substr(space + 1);
    int depth = 0;
    for(char c : rest)
    {
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        if(c == ',' && depth == 0) parts.push_back(trim(cur)), cur.clear();
        else cur += c;
    }
    parts.push_back(trim(cur));
    // Modifiers follow the last operand after a space: "%2 op_sel:[0,0,1]".
    std::string& last = parts.back();
    size_t gap = last.find_first_of(" \t");
    if(gap != std::string::npos)
    {
        std::string modifier = trim(last.substr(gap + 1));
        last = trim(last.substr(0, gap));
        if(insn.kind == cvt_pk_fp8 && (modifier == "op_sel:[0,0,1]" || modifier == "op_sel:[0,0,0,1]"))
            insn.word_select = true;
        else if(!(insn.kind == cvt_pk_fp8 && (modifier == "op_sel:[0,0,0]" || modifier == "op_sel:[0,0]")))
            insn.kind = bad;
    }
    if(parts.size() != nargs) insn.kind = bad;
    for(const auto& part : parts)
    {
        Arg arg;
        if(!parse_arg(part, arg)) insn.kind = bad;
        insn.args.push_back(arg);
    }
    return insn;
}

std::vector<Insn> parse(const char* text)
{
    std::vector<Insn> program;
    std::string line;
    for(const char* p = text;; ++p)
    {
        if(*p == '\n' || *p == ';' || *p == 0)
        {
            std::string t = trim(line);
            if(!t.empty() && t.rfind("//", 0) != 0 && t.rfind("s_nop", 0) != 0) program.push_back(parse_line(t));
            line.clear();
            if(*p == 0) break;
        }
        else
            line += *p;
    }
    return program;
}

struct Cached { const char* text; std::vector<Insn> program; };
std::deque<Cached> g_programs;  // a deque: references to earlier programs stay valid as it grows

const std::vector<Insn>& program_for(const char* text)
{
    static const char* last_text = nullptr;  // statements repeat: most calls hit the last one looked up
    static size_t last = 0;
    if(text == last_text) return g_programs[last].program;
    for(size_t i = 0; i < g_programs.size(); ++i)
        if(g_programs[i].text == text) { last_text = text, last = i; return g_programs[i].program; }
    g_programs.push_back({text, parse(text)});
    last_text = text, last = g_programs.size() - 1;
    return g_programs.back().program;
}

AsmOperand* reg(const Insn& insn, const Arg& arg, AsmOperand* ops, int count)
{
    if(arg.index >= 0 && arg.index < count) return &ops[arg.index];
    if(!arg.name.empty())
        for(int i = 0; i < count; ++i)
            if(ops[i].name && arg.name == ops[i].name) return &ops[i];
    if(arg.index < 0 && arg.name.empty()) return nullptr;
    hipcpu_fail("inline-asm operand not understood", insn.text.c_str());
}

float f32(const Insn& insn, const Arg& arg, AsmOperand* ops, int count, int half = 0)
{
    if(arg.index >= 0 && arg.index < count && !arg.abs && !arg.neg && ops[arg.index].size >= 4u * (half + 1))
    {
        float v;  // the common case: a plain numbered register
        memcpy(&v, ops[arg.index].bytes + 4 * half, 4);
        return v;
    }
    AsmOperand* r = reg(insn, arg, ops, count);
    float v = arg.literal;
    if(r)
    {
        if(r->size < 4u * (half + 1)) hipcpu_fail("inline-asm operand narrower than the instruction reads", insn.text.c_str());
        memcpy(&v, r->bytes + 4 * half, 4);
    }
    if(arg.abs) v = fabsf(v);
    if(arg.neg) v = -v;
    return v;
}

void store(const Insn& insn, AsmOperand* ops, int count, const void* value, unsigned size)
{
    AsmOperand* d = reg(insn, insn.args[0], ops, count);
    if(!d || d->size < size || insn.args[0].abs || insn.args[0].neg)
        hipcpu_fail("inline-asm destination not understood", insn.text.c_str());
    memcpy(d->bytes, value, size);
}

void execute(const Insn& insn, AsmOperand* ops, int count)
{
    using namespace hipcpu::isa;
    uint64_t* counts = const_cast<uint64_t*>(hipcpu_instruction_counts());
    auto a = [&](int i, int half = 0) { return f32(insn, insn.args[i], ops, count, half); };
    switch(insn.kind)
    {
    case max3: case min3: case med3: {
        float r = insn.kind == max3 ? max3_f32(a(1), a(2), a(3))
                  : insn.kind == min3 ? min3_f32(a(1), a(2), a(3)) : med3_f32(a(1), a(2), a(3));
        store(insn, ops, count, &r, 4);
        break;
    }
    case max2: case min2: case mul: {
        float r = insn.kind == max2 ? max_f32(a(1), a(2)) : insn.kind == min2 ? min_f32(a(1), a(2)) : mul_f32(a(1), a(2));
        store(insn, ops, count, &r, 4);
        break;
    }
    case pk_mul: {
        float r[2] = {mul_f32(a(1, 0), a(2, 0)), mul_f32(a(1, 1), a(2, 1))};
        store(insn, ops, count, r, 8);
        break;
    }
    case cvt_pk_fp8: {
        AsmOperand* d = reg(insn, insn.args[0], ops, count);
        uint32_t old = 0;
        if(d) memcpy(&old, d->bytes, 4);
        uint32_t r = cvt_pk_fp8_f32(a(1), a(2), old, insn.word_select, kFp8);
        store(insn, ops, count, &r, 4);
        break;
    }
    case unknown: hipcpu_fail("instruction not emulated", insn.text.c_str());
    case bad: hipcpu_fail("inline-asm operands or modifiers not emulated", insn.text.c_str());
    }
    ++counts[insn.kind];
}

} // namespace

extern "C" HIPCPU_EXPORT void hipcpu_run_asm(const char* text, AsmOperand* ops, int count)
{
    // A tied input ("0") starts in the register of the output it names.
    for(int i = 0; i < count; ++i)
        if(isdigit((unsigned char)ops[i].constraint[0]))
        {
            int tied = atoi(ops[i].constraint);
            if(tied < count) memcpy(ops[tied].bytes, ops[i].bytes, ops[tied].size);
        }
    for(const Insn& insn : program_for(text)) execute(insn, ops, count);
    for(int i = 0; i < count; ++i)
    {
        const char* c = ops[i].constraint;
        if(c[0] == '=' || c[0] == '+') memcpy(ops[i].target, ops[i].bytes, ops[i].size);
    }
}
