// Write half of the HCA DMA engine: packet buffer -> host memory.
//
// Takes one write descriptor at a time, pulls its payload from the packet
// buffer as a stream packed from byte 0, and emits posted-write TLPs of at
// most max payload size that never cross an MPS-aligned boundary (so never a
// 4 KiB one). TLP beats are host-address aligned; keep marks the bytes that
// belong to the TLP.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module hca_dma_wr #
(
    // Width of the data path in bits (a multiple of 8, power of two bytes)
    parameter DATA_WIDTH = 512,
    // Byte lanes of the data path
    parameter KEEP_WIDTH = DATA_WIDTH/8,
    // Host address width
    parameter ADDR_WIDTH = 64,
    // Descriptor length field width
    parameter LEN_WIDTH = 32,
    // Descriptor tag width
    parameter TAG_WIDTH = 8,
    // Completion slot index width (see hca_dma_engine)
    parameter SLOT_WIDTH = 4,
    // Largest TLP payload in bytes (power of two, at most 4096)
    parameter MAX_BURST = 4096
)
(
    input  wire                         clk,
    input  wire                         rst,

    // Max payload size in bytes: power of two, 128 .. MAX_BURST
    input  wire [BURST_WIDTH-1:0]       cfg_mps,

    // Write descriptor (already checked)
    input  wire                         s_desc_valid,
    output wire                         s_desc_ready,
    input  wire [ADDR_WIDTH-1:0]        s_desc_addr,
    input  wire [LEN_WIDTH-1:0]         s_desc_len,
    input  wire [TAG_WIDTH-1:0]         s_desc_tag,
    input  wire [SLOT_WIDTH-1:0]        s_desc_slot,

    // Payload from the packet buffer, packed from byte 0 of the descriptor
    // named by data_tag while data_tag_valid
    input  wire                         s_axis_data_valid,
    output wire                         s_axis_data_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_data_data,
    output wire                         data_tag_valid,
    output wire [TAG_WIDTH-1:0]         data_tag,

    // Posted-write TLP beats to host memory; addr/len name the whole TLP
    output wire                         m_axis_wr_valid,
    input  wire                         m_axis_wr_ready,
    output wire [ADDR_WIDTH-1:0]        m_axis_wr_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_wr_len,
    output wire [DATA_WIDTH-1:0]        m_axis_wr_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_wr_keep,
    output wire                         m_axis_wr_last,

    // A descriptor's last TLP beat left
    output wire                         done_valid,
    output wire [SLOT_WIDTH-1:0]        done_slot,

    // No state changes until an input arrives
    output wire                         quiet
);

localparam BURST_WIDTH = $clog2(MAX_BURST) + 1;
localparam OFF_WIDTH = $clog2(KEEP_WIDTH);
localparam BEAT_WIDTH = BURST_WIDTH - OFF_WIDTH + 1;
localparam IN_WIDTH = LEN_WIDTH - OFF_WIDTH + 1;

// Parameter checks, at elaboration
if (DATA_WIDTH < 16 || DATA_WIDTH > 1024 || (DATA_WIDTH & (DATA_WIDTH - 1)) != 0) begin : g_check_data_width
    // A beat has at least two byte lanes and is no wider than the smallest
    // request (128 B); the byte lanes are a power of two.
    $error("hca_dma_wr: DATA_WIDTH = %0d: must be a power of two from 16 to 1024 bits", DATA_WIDTH);
end
if (KEEP_WIDTH * 8 != DATA_WIDTH) begin : g_check_keep_width
    $error("hca_dma_wr: KEEP_WIDTH = %0d: must be DATA_WIDTH/8 = %0d", KEEP_WIDTH, DATA_WIDTH / 8);
end
if (MAX_BURST < 128 || MAX_BURST > 4096 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_check_max_burst
    $error("hca_dma_wr: MAX_BURST = %0d: must be a power of two from 128 to 4096 bytes", MAX_BURST);
end
if (SLOT_WIDTH < 1) begin : g_check_slot_width
    $error("hca_dma_wr: SLOT_WIDTH = %0d: must be at least 1", SLOT_WIDTH);
end

reg                     active_reg = 1'b0, active_next;
reg [ADDR_WIDTH-1:0]    addr_reg = {ADDR_WIDTH{1'b0}}, addr_next;
reg [LEN_WIDTH-1:0]     rem_reg = {LEN_WIDTH{1'b0}}, rem_next;
reg [TAG_WIDTH-1:0]     tag_reg = {TAG_WIDTH{1'b0}}, tag_next;
reg [SLOT_WIDTH-1:0]    slot_reg = {SLOT_WIDTH{1'b0}}, slot_next;
reg [OFF_WIDTH-1:0]     shift_reg = {OFF_WIDTH{1'b0}}, shift_next;
reg [IN_WIDTH-1:0]      in_left_reg = {IN_WIDTH{1'b0}}, in_left_next;
// Wide registers load under an enable in the clocked process: the data
// path is only shifted in the cycles that use it
reg [DATA_WIDTH-1:0]    prev_reg = {DATA_WIDTH{1'b0}};
reg                     prev_we;

// The TLP being emitted
reg [ADDR_WIDTH-1:0]    tlp_addr_reg = {ADDR_WIDTH{1'b0}}, tlp_addr_next;
reg [BURST_WIDTH-1:0]   tlp_len_reg = {BURST_WIDTH{1'b0}}, tlp_len_next;
reg [BEAT_WIDTH-1:0]    tlp_left_reg = {BEAT_WIDTH{1'b0}}, tlp_left_next;

reg                     out_valid_reg = 1'b0, out_valid_next;
reg [ADDR_WIDTH-1:0]    out_addr_reg = {ADDR_WIDTH{1'b0}}, out_addr_next;
reg [BURST_WIDTH-1:0]   out_len_reg = {BURST_WIDTH{1'b0}}, out_len_next;
reg [DATA_WIDTH-1:0]    out_data_reg = {DATA_WIDTH{1'b0}};
reg                     out_data_we;
reg [KEEP_WIDTH-1:0]    out_keep_reg = {KEEP_WIDTH{1'b0}}, out_keep_next;
reg                     out_last_reg = 1'b0, out_last_next;
reg                     out_done_reg = 1'b0, out_done_next;
reg [SLOT_WIDTH-1:0]    out_slot_reg = {SLOT_WIDTH{1'b0}}, out_slot_next;

// Keep mask of the first n bytes, 1 <= n <= KEEP_WIDTH
function [KEEP_WIDTH-1:0] keep_first(input [OFF_WIDTH:0] n);
    keep_first = {KEEP_WIDTH{1'b1}} >> (KEEP_WIDTH[OFF_WIDTH:0] - n);
endfunction

// Header of a TLP that would start now
wire new_tlp = tlp_left_reg == {BEAT_WIDTH{1'b0}};
wire [BURST_WIDTH-1:0] mps_mask = cfg_mps - 1'b1;
wire [BURST_WIDTH-1:0] to_boundary = cfg_mps - (addr_reg[BURST_WIDTH-1:0] & mps_mask);
wire [BURST_WIDTH-1:0] new_len = rem_reg < {{LEN_WIDTH-BURST_WIDTH{1'b0}}, to_boundary} ?
                                 rem_reg[BURST_WIDTH-1:0] : to_boundary;
// Low bits of the span are the byte offset of its end: only the beat count is used
/* verilator lint_off UNUSEDSIGNAL */
wire [BURST_WIDTH:0] new_span = {{BURST_WIDTH-OFF_WIDTH+1{1'b0}}, addr_reg[OFF_WIDTH-1:0]} +
                                {1'b0, new_len} + KEEP_WIDTH[BURST_WIDTH:0] - 1'b1;
/* verilator lint_on UNUSEDSIGNAL */

wire [ADDR_WIDTH-1:0] cur_addr = new_tlp ? addr_reg : tlp_addr_reg;
wire [BURST_WIDTH-1:0] cur_len = new_tlp ? new_len : tlp_len_reg;
wire [BEAT_WIDTH-1:0] cur_left = new_tlp ? new_span[BURST_WIDTH:OFF_WIDTH] : tlp_left_reg;
wire last_beat = cur_left == {{BEAT_WIDTH-1{1'b0}}, 1'b1};
wire desc_last = last_beat && (new_tlp ? rem_reg == {{LEN_WIDTH-BURST_WIDTH{1'b0}}, new_len}
                                       : rem_reg == {LEN_WIDTH{1'b0}});
// Byte lane of the TLP's last byte
wire [OFF_WIDTH-1:0] cur_end = cur_addr[OFF_WIDTH-1:0] + cur_len[OFF_WIDTH-1:0] - 1'b1;
wire [KEEP_WIDTH-1:0] keep_lo = new_tlp ? ~(keep_first({1'b0, cur_addr[OFF_WIDTH-1:0]} + 1'b1) >> 1)
                                        : {KEEP_WIDTH{1'b1}};
wire [KEEP_WIDTH-1:0] keep_hi = last_beat ? keep_first({1'b0, cur_end} + 1'b1)
                                          : {KEEP_WIDTH{1'b1}};

wire need_input = in_left_reg != {IN_WIDTH{1'b0}};
wire out_free = !out_valid_reg || m_axis_wr_ready;
wire [OFF_WIDTH:0] back_shift = KEEP_WIDTH[OFF_WIDTH:0] - {1'b0, shift_reg};

assign s_desc_ready = !active_reg;
assign s_axis_data_ready = active_reg && out_free && need_input;
assign data_tag_valid = active_reg;
assign data_tag = tag_reg;

assign m_axis_wr_valid = out_valid_reg;
assign m_axis_wr_addr = out_addr_reg;
assign m_axis_wr_len = out_len_reg;
assign m_axis_wr_data = out_data_reg;
assign m_axis_wr_keep = out_keep_reg;
assign m_axis_wr_last = out_last_reg;

assign done_valid = out_valid_reg && m_axis_wr_ready && out_last_reg && out_done_reg;
assign done_slot = out_slot_reg;
assign quiet = !out_valid_reg && (!active_reg || need_input);

always @* begin
    active_next = active_reg;
    addr_next = addr_reg;
    rem_next = rem_reg;
    tag_next = tag_reg;
    slot_next = slot_reg;
    shift_next = shift_reg;
    in_left_next = in_left_reg;
    prev_we = 1'b0;
    tlp_addr_next = tlp_addr_reg;
    tlp_len_next = tlp_len_reg;
    tlp_left_next = tlp_left_reg;

    out_valid_next = out_valid_reg && !m_axis_wr_ready;
    out_addr_next = out_addr_reg;
    out_len_next = out_len_reg;
    out_data_we = 1'b0;
    out_keep_next = out_keep_reg;
    out_last_next = out_last_reg;
    out_done_next = out_done_reg;
    out_slot_next = out_slot_reg;

    if (s_desc_valid && s_desc_ready) begin
        active_next = 1'b1;
        addr_next = s_desc_addr;
        rem_next = s_desc_len;
        tag_next = s_desc_tag;
        slot_next = s_desc_slot;
        shift_next = s_desc_addr[OFF_WIDTH-1:0];
        in_left_next = s_desc_len[LEN_WIDTH-1:OFF_WIDTH] + {{IN_WIDTH-1{1'b0}}, s_desc_len[OFF_WIDTH-1:0] != 0};
        tlp_left_next = {BEAT_WIDTH{1'b0}};
    end

    if (active_reg && out_free && (!need_input || s_axis_data_valid)) begin
        out_valid_next = 1'b1;
        out_addr_next = cur_addr;
        out_len_next = cur_len;
        out_data_we = 1'b1;
        out_keep_next = keep_lo & keep_hi;
        out_last_next = last_beat;
        out_done_next = desc_last;
        out_slot_next = slot_reg;
        if (new_tlp) begin
            tlp_addr_next = addr_reg;
            tlp_len_next = new_len;
            addr_next = addr_reg + {{ADDR_WIDTH-BURST_WIDTH{1'b0}}, new_len};
            rem_next = rem_reg - {{LEN_WIDTH-BURST_WIDTH{1'b0}}, new_len};
        end
        tlp_left_next = cur_left - 1'b1;
        if (need_input) begin
            in_left_next = in_left_reg - 1'b1;
            prev_we = 1'b1;
        end
        if (desc_last) begin
            active_next = 1'b0;
        end
    end
end

always @(posedge clk) begin
    active_reg <= active_next;
    addr_reg <= addr_next;
    rem_reg <= rem_next;
    tag_reg <= tag_next;
    slot_reg <= slot_next;
    shift_reg <= shift_next;
    in_left_reg <= in_left_next;
    if (prev_we) begin
        prev_reg <= s_axis_data_data;
    end
    tlp_addr_reg <= tlp_addr_next;
    tlp_len_reg <= tlp_len_next;
    tlp_left_reg <= tlp_left_next;
    out_valid_reg <= out_valid_next;
    out_addr_reg <= out_addr_next;
    out_len_reg <= out_len_next;
    // The beat at host alignment: this input beat shifted up, the tail of the
    // previous one below it (or the tail alone once the input is used up).
    if (out_data_we) begin
        out_data_reg <= (need_input ? s_axis_data_data << {shift_reg, 3'b000} : {DATA_WIDTH{1'b0}}) |
                        (shift_reg == {OFF_WIDTH{1'b0}} ? {DATA_WIDTH{1'b0}} : prev_reg >> {back_shift, 3'b000});
    end
    out_keep_reg <= out_keep_next;
    out_last_reg <= out_last_next;
    out_done_reg <= out_done_next;
    out_slot_reg <= out_slot_next;

    if (rst) begin
        active_reg <= 1'b0;
        in_left_reg <= {IN_WIDTH{1'b0}};
        tlp_left_reg <= {BEAT_WIDTH{1'b0}};
        out_valid_reg <= 1'b0;
    end
end

endmodule

`resetall
