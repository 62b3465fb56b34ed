// Read half of the HCA DMA engine: host memory -> packet buffer.
//
// Takes one read descriptor at a time, cuts it into host read requests that
// never cross a max-read-request-size aligned boundary (so never a 4 KiB one),
// keeps up to OUTSTANDING_READS of them in flight, and realigns the
// host-address-aligned completion beats into a stream packed from byte 0 of
// the descriptor. Completions return in request order (one PCIe link, the
// order the host model gives), so the in-flight requests are a FIFO.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module hca_dma_rd #
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
    // Read requests in flight at most (power of two)
    parameter OUTSTANDING_READS = 32,
    // Largest request in bytes (power of two, at most 4096)
    parameter MAX_BURST = 4096
)
(
    input  wire                         clk,
    input  wire                         rst,

    // Max read request size in bytes: power of two, 128 .. MAX_BURST
    input  wire [BURST_WIDTH-1:0]       cfg_mrrs,

    // Read descriptor (already checked)
    input  wire                         s_desc_valid,
    output wire                         s_desc_ready,
    input  wire [ADDR_WIDTH-1:0]        s_desc_addr,
    input  wire [LEN_WIDTH-1:0]         s_desc_len,
    input  wire [TAG_WIDTH-1:0]         s_desc_tag,
    input  wire [SLOT_WIDTH-1:0]        s_desc_slot,

    // Host read requests
    output wire                         m_axis_req_valid,
    input  wire                         m_axis_req_ready,
    output wire [ADDR_WIDTH-1:0]        m_axis_req_addr,
    output wire [BURST_WIDTH-1:0]       m_axis_req_len,
    output wire [OR_WIDTH-1:0]          m_axis_req_tag,

    // Read completion data, host-address aligned beats, in request order
    input  wire                         s_axis_cpl_valid,
    output wire                         s_axis_cpl_ready,
    input  wire [DATA_WIDTH-1:0]        s_axis_cpl_data,

    // Data to the packet buffer, packed from byte 0 of each descriptor
    output wire                         m_axis_data_valid,
    input  wire                         m_axis_data_ready,
    output wire [DATA_WIDTH-1:0]        m_axis_data_data,
    output wire [KEEP_WIDTH-1:0]        m_axis_data_keep,
    output wire                         m_axis_data_last,
    output wire [TAG_WIDTH-1:0]         m_axis_data_id,

    // A descriptor's last byte left for the packet buffer
    output wire                         done_valid,
    output wire [SLOT_WIDTH-1:0]        done_slot,

    output wire [OR_WIDTH:0]            stat_inflight,
    // No state changes until an input arrives
    output wire                         quiet
);

localparam BURST_WIDTH = $clog2(MAX_BURST) + 1;
localparam OR_WIDTH = $clog2(OUTSTANDING_READS);
localparam OFF_WIDTH = $clog2(KEEP_WIDTH);
localparam BEAT_WIDTH = BURST_WIDTH - OFF_WIDTH + 1;

// Parameter checks, at elaboration
if (DATA_WIDTH < 16 || DATA_WIDTH > 1024 || (DATA_WIDTH & (DATA_WIDTH - 1)) != 0) begin : g_check_data_width
    // A beat has at least two byte lanes and is no wider than the smallest
    // request (128 B); the byte lanes are a power of two.
    $error("hca_dma_rd: DATA_WIDTH = %0d: must be a power of two from 16 to 1024 bits", DATA_WIDTH);
end
if (KEEP_WIDTH * 8 != DATA_WIDTH) begin : g_check_keep_width
    $error("hca_dma_rd: KEEP_WIDTH = %0d: must be DATA_WIDTH/8 = %0d", KEEP_WIDTH, DATA_WIDTH / 8);
end
if (MAX_BURST < 128 || MAX_BURST > 4096 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_check_max_burst
    $error("hca_dma_rd: MAX_BURST = %0d: must be a power of two from 128 to 4096 bytes", MAX_BURST);
end
if (OUTSTANDING_READS < 2 || (OUTSTANDING_READS & (OUTSTANDING_READS - 1)) != 0) begin : g_check_outstanding_reads
    $error("hca_dma_rd: OUTSTANDING_READS = %0d: must be a power of two, at least 2", OUTSTANDING_READS);
end
if (SLOT_WIDTH < 1) begin : g_check_slot_width
    $error("hca_dma_rd: SLOT_WIDTH = %0d: must be at least 1", SLOT_WIDTH);
end

// What the output data register loads
localparam [2:0] OUT_HOLD = 3'd0, OUT_BEAT = 3'd1, OUT_SHIFTED = 3'd2, OUT_JOINED = 3'd3, OUT_FLUSH = 3'd4;

// Request generator
reg                     req_active_reg = 1'b0, req_active_next;
reg [ADDR_WIDTH-1:0]    req_addr_reg = {ADDR_WIDTH{1'b0}}, req_addr_next;
reg [LEN_WIDTH-1:0]     req_rem_reg = {LEN_WIDTH{1'b0}}, req_rem_next;
reg [LEN_WIDTH-1:0]     req_len_reg = {LEN_WIDTH{1'b0}}, req_len_next;
reg                     req_first_reg = 1'b0, req_first_next;
reg [TAG_WIDTH-1:0]     req_tag_reg = {TAG_WIDTH{1'b0}}, req_tag_next;
reg [SLOT_WIDTH-1:0]    req_slot_reg = {SLOT_WIDTH{1'b0}}, req_slot_next;

// In-flight requests, oldest at rd_ptr
reg [OR_WIDTH:0]        fifo_wr_ptr_reg = {OR_WIDTH+1{1'b0}}, fifo_wr_ptr_next;
reg [OR_WIDTH:0]        fifo_rd_ptr_reg = {OR_WIDTH+1{1'b0}}, fifo_rd_ptr_next;
reg [BEAT_WIDTH-1:0]    fifo_beats [0:OUTSTANDING_READS-1];
reg                     fifo_first [0:OUTSTANDING_READS-1];
reg                     fifo_last  [0:OUTSTANDING_READS-1];
reg [OFF_WIDTH-1:0]     fifo_shift [0:OUTSTANDING_READS-1];
reg [LEN_WIDTH-1:0]     fifo_len   [0:OUTSTANDING_READS-1];
reg [TAG_WIDTH-1:0]     fifo_tag   [0:OUTSTANDING_READS-1];
reg [SLOT_WIDTH-1:0]    fifo_slot  [0:OUTSTANDING_READS-1];
reg                     fifo_we;

// Realigner
reg [BEAT_WIDTH-1:0]    beat_cnt_reg = {BEAT_WIDTH{1'b0}}, beat_cnt_next;
reg [OFF_WIDTH-1:0]     shift_reg = {OFF_WIDTH{1'b0}}, shift_next;
reg [LEN_WIDTH-1:0]     out_rem_reg = {LEN_WIDTH{1'b0}}, out_rem_next;
reg [TAG_WIDTH-1:0]     cur_tag_reg = {TAG_WIDTH{1'b0}}, cur_tag_next;
reg [SLOT_WIDTH-1:0]    cur_slot_reg = {SLOT_WIDTH{1'b0}}, cur_slot_next;
reg [DATA_WIDTH-1:0]    prev_reg = {DATA_WIDTH{1'b0}};
// Wide registers load under an enable in the clocked process: the data
// path is only shifted in the cycles that use it
reg                     prev_we;
reg                     flush_reg = 1'b0, flush_next;

// Output register
reg                     out_valid_reg = 1'b0, out_valid_next;
reg [DATA_WIDTH-1:0]    out_data_reg = {DATA_WIDTH{1'b0}};
reg [2:0]               out_data_sel;  // which beat out_data_reg loads, OUT_*
reg [KEEP_WIDTH-1:0]    out_keep_reg = {KEEP_WIDTH{1'b0}}, out_keep_next;
reg                     out_last_reg = 1'b0, out_last_next;
reg [TAG_WIDTH-1:0]     out_id_reg = {TAG_WIDTH{1'b0}}, out_id_next;
reg [SLOT_WIDTH-1:0]    out_slot_reg = {SLOT_WIDTH{1'b0}}, out_slot_next;

wire [OR_WIDTH:0] inflight = fifo_wr_ptr_reg - fifo_rd_ptr_reg;
wire fifo_full = inflight == OUTSTANDING_READS[OR_WIDTH:0];
wire fifo_empty = inflight == {OR_WIDTH+1{1'b0}};
wire [OR_WIDTH-1:0] head = fifo_rd_ptr_reg[OR_WIDTH-1:0];

// The next request: up to the next MRRS-aligned address or the end
wire [BURST_WIDTH-1:0] mrrs_mask = cfg_mrrs - 1'b1;
wire [BURST_WIDTH-1:0] to_boundary = cfg_mrrs - (req_addr_reg[BURST_WIDTH-1:0] & mrrs_mask);
wire [BURST_WIDTH-1:0] req_len = req_rem_reg < {{LEN_WIDTH-BURST_WIDTH{1'b0}}, to_boundary} ?
                                 req_rem_reg[BURST_WIDTH-1:0] : to_boundary;
// Low bits of the span are the byte offset of its end: only the beat count is used
/* verilator lint_off UNUSEDSIGNAL */
wire [BURST_WIDTH:0] req_span = {{BURST_WIDTH-OFF_WIDTH+1{1'b0}}, req_addr_reg[OFF_WIDTH-1:0]} +
                                {1'b0, req_len} + KEEP_WIDTH[BURST_WIDTH:0] - 1'b1;
/* verilator lint_on UNUSEDSIGNAL */
wire [BEAT_WIDTH-1:0] req_beats = req_span[BURST_WIDTH:OFF_WIDTH];

assign m_axis_req_valid = req_active_reg && !fifo_full;
assign m_axis_req_addr = req_addr_reg;
assign m_axis_req_len = req_len;
assign m_axis_req_tag = fifo_wr_ptr_reg[OR_WIDTH-1:0];
assign s_desc_ready = !req_active_reg;

wire out_free = !out_valid_reg || m_axis_data_ready;
assign s_axis_cpl_ready = out_free && !flush_reg && !fifo_empty;

assign m_axis_data_valid = out_valid_reg;
assign m_axis_data_data = out_data_reg;
assign m_axis_data_keep = out_keep_reg;
assign m_axis_data_last = out_last_reg;
assign m_axis_data_id = out_id_reg;

assign done_valid = out_valid_reg && m_axis_data_ready && out_last_reg;
assign done_slot = out_slot_reg;
assign stat_inflight = inflight;
assign quiet = (!req_active_reg || fifo_full) && !out_valid_reg && !flush_reg;

// Keep mask of the first n bytes, 1 <= n <= KEEP_WIDTH
function [KEEP_WIDTH-1:0] keep_first(input [OFF_WIDTH:0] n);
    keep_first = {KEEP_WIDTH{1'b1}} >> (KEEP_WIDTH[OFF_WIDTH:0] - n);
endfunction

// Head entry and what this beat is within its descriptor
wire head_first_beat = fifo_first[head] && beat_cnt_reg == {BEAT_WIDTH{1'b0}};
wire head_last_of_req = beat_cnt_reg == fifo_beats[head] - 1'b1;
wire head_last_of_desc = fifo_last[head] && head_last_of_req;
wire [OFF_WIDTH-1:0] beat_shift = head_first_beat ? fifo_shift[head] : shift_reg;
wire [LEN_WIDTH-1:0] beat_rem = head_first_beat ? fifo_len[head] : out_rem_reg;
wire [OFF_WIDTH:0] beat_avail = KEEP_WIDTH[OFF_WIDTH:0] - {1'b0, beat_shift};
wire [OFF_WIDTH:0] beat_take = beat_rem < KEEP_WIDTH ? beat_rem[OFF_WIDTH:0] : KEEP_WIDTH[OFF_WIDTH:0];
wire [OFF_WIDTH:0] flush_take = out_rem_reg[OFF_WIDTH:0];

always @* begin
    req_active_next = req_active_reg;
    req_addr_next = req_addr_reg;
    req_rem_next = req_rem_reg;
    req_len_next = req_len_reg;
    req_first_next = req_first_reg;
    req_tag_next = req_tag_reg;
    req_slot_next = req_slot_reg;
    fifo_wr_ptr_next = fifo_wr_ptr_reg;
    fifo_rd_ptr_next = fifo_rd_ptr_reg;
    fifo_we = 1'b0;

    beat_cnt_next = beat_cnt_reg;
    shift_next = shift_reg;
    out_rem_next = out_rem_reg;
    cur_tag_next = cur_tag_reg;
    cur_slot_next = cur_slot_reg;
    prev_we = 1'b0;
    flush_next = flush_reg;

    out_valid_next = out_valid_reg && !m_axis_data_ready;
    out_data_sel = OUT_HOLD;
    out_keep_next = out_keep_reg;
    out_last_next = out_last_reg;
    out_id_next = out_id_reg;
    out_slot_next = out_slot_reg;

    // Accept a descriptor once the previous one has all its requests out
    if (s_desc_valid && s_desc_ready) begin
        req_active_next = 1'b1;
        req_addr_next = s_desc_addr;
        req_rem_next = s_desc_len;
        req_len_next = s_desc_len;
        req_first_next = 1'b1;
        req_tag_next = s_desc_tag;
        req_slot_next = s_desc_slot;
    end

    // Issue one request per cycle while tags are free
    if (m_axis_req_valid && m_axis_req_ready) begin
        fifo_we = 1'b1;
        fifo_wr_ptr_next = fifo_wr_ptr_reg + 1'b1;
        req_addr_next = req_addr_reg + {{ADDR_WIDTH-BURST_WIDTH{1'b0}}, req_len};
        req_rem_next = req_rem_reg - {{LEN_WIDTH-BURST_WIDTH{1'b0}}, req_len};
        req_first_next = 1'b0;
        if (req_rem_reg == {{LEN_WIDTH-BURST_WIDTH{1'b0}}, req_len}) begin
            req_active_next = 1'b0;
        end
    end

    if (flush_reg && out_free) begin
        // The descriptor's tail sits in the last beat alone
        out_valid_next = 1'b1;
        out_data_sel = OUT_FLUSH;
        out_keep_next = keep_first(flush_take);
        out_last_next = 1'b1;
        out_id_next = cur_tag_reg;
        out_slot_next = cur_slot_reg;
        out_rem_next = {LEN_WIDTH{1'b0}};
        flush_next = 1'b0;
    end else if (s_axis_cpl_valid && s_axis_cpl_ready) begin
        if (head_first_beat) begin
            shift_next = fifo_shift[head];
            cur_tag_next = fifo_tag[head];
            cur_slot_next = fifo_slot[head];
        end
        prev_we = 1'b1;
        out_id_next = head_first_beat ? fifo_tag[head] : cur_tag_reg;
        out_slot_next = head_first_beat ? fifo_slot[head] : cur_slot_reg;
        if (beat_shift == {OFF_WIDTH{1'b0}}) begin
            out_valid_next = 1'b1;
            out_data_sel = OUT_BEAT;
            out_keep_next = keep_first(beat_take);
            out_last_next = beat_rem <= KEEP_WIDTH;
            out_rem_next = beat_rem - {{LEN_WIDTH-OFF_WIDTH-1{1'b0}}, beat_take};
        end else if (head_first_beat) begin
            if (beat_rem <= {{LEN_WIDTH-OFF_WIDTH-1{1'b0}}, beat_avail}) begin
                out_valid_next = 1'b1;
                out_data_sel = OUT_SHIFTED;
                out_keep_next = keep_first(beat_rem[OFF_WIDTH:0]);
                out_last_next = 1'b1;
                out_rem_next = {LEN_WIDTH{1'b0}};
            end else begin
                out_rem_next = beat_rem;
            end
        end else begin
            out_valid_next = 1'b1;
            out_data_sel = OUT_JOINED;
            out_keep_next = keep_first(beat_take);
            out_last_next = beat_rem <= KEEP_WIDTH;
            out_rem_next = beat_rem - {{LEN_WIDTH-OFF_WIDTH-1{1'b0}}, beat_take};
            if (beat_rem > KEEP_WIDTH && head_last_of_desc) begin
                flush_next = 1'b1;
            end
        end
        if (head_last_of_req) begin
            beat_cnt_next = {BEAT_WIDTH{1'b0}};
            fifo_rd_ptr_next = fifo_rd_ptr_reg + 1'b1;
        end else begin
            beat_cnt_next = beat_cnt_reg + 1'b1;
        end
    end
end

always @(posedge clk) begin
    req_active_reg <= req_active_next;
    req_addr_reg <= req_addr_next;
    req_rem_reg <= req_rem_next;
    req_len_reg <= req_len_next;
    req_first_reg <= req_first_next;
    req_tag_reg <= req_tag_next;
    req_slot_reg <= req_slot_next;
    fifo_wr_ptr_reg <= fifo_wr_ptr_next;
    fifo_rd_ptr_reg <= fifo_rd_ptr_next;
    beat_cnt_reg <= beat_cnt_next;
    shift_reg <= shift_next;
    out_rem_reg <= out_rem_next;
    cur_tag_reg <= cur_tag_next;
    cur_slot_reg <= cur_slot_next;
    if (prev_we) begin
        prev_reg <= s_axis_cpl_data;
    end
    flush_reg <= flush_next;
    out_valid_reg <= out_valid_next;
    case (out_data_sel)
        OUT_BEAT: out_data_reg <= s_axis_cpl_data;
        OUT_SHIFTED: out_data_reg <= s_axis_cpl_data >> {beat_shift, 3'b000};
        OUT_JOINED: out_data_reg <= (prev_reg >> {beat_shift, 3'b000}) | (s_axis_cpl_data << {beat_avail, 3'b000});
        OUT_FLUSH: out_data_reg <= prev_reg >> {shift_reg, 3'b000};
        default: ;
    endcase
    out_keep_reg <= out_keep_next;
    out_last_reg <= out_last_next;
    out_id_reg <= out_id_next;
    out_slot_reg <= out_slot_next;

    if (fifo_we) begin
        fifo_beats[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_beats;
        fifo_first[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_first_reg;
        fifo_last[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_rem_reg == {{LEN_WIDTH-BURST_WIDTH{1'b0}}, req_len};
        fifo_shift[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_addr_reg[OFF_WIDTH-1:0];
        fifo_len[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_len_reg;
        fifo_tag[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_tag_reg;
        fifo_slot[fifo_wr_ptr_reg[OR_WIDTH-1:0]] <= req_slot_reg;
    end

    if (rst) begin
        req_active_reg <= 1'b0;
        req_first_reg <= 1'b0;
        fifo_wr_ptr_reg <= {OR_WIDTH+1{1'b0}};
        fifo_rd_ptr_reg <= {OR_WIDTH+1{1'b0}};
        beat_cnt_reg <= {BEAT_WIDTH{1'b0}};
        flush_reg <= 1'b0;
        out_valid_reg <= 1'b0;
    end
end

endmodule

`resetall
