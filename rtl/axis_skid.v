// Skid buffer: a register slice on a valid/ready stream whose outputs and
// s_ready all come from registers, so nothing combinational passes through
// it in either direction. Full throughput: the temp register holds the beat
// accepted while the output register was stalled.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module axis_skid #
(
    // Width of the payload in bits
    parameter WIDTH = 8
)
(
    input  wire             clk,
    input  wire             rst,

    input  wire             s_valid,
    output wire             s_ready,
    input  wire [WIDTH-1:0] s_data,

    output wire             m_valid,
    input  wire             m_ready,
    output wire [WIDTH-1:0] m_data
);

// Parameter check, at elaboration
if (WIDTH < 1) begin : g_check_width
    $error("axis_skid: WIDTH = %0d: must be at least 1", WIDTH);
end

reg             s_ready_reg = 1'b0, s_ready_next;
reg             m_valid_reg = 1'b0, m_valid_next;
reg [WIDTH-1:0] m_data_reg = {WIDTH{1'b0}};
reg             temp_valid_reg = 1'b0, temp_valid_next;
reg [WIDTH-1:0] temp_data_reg = {WIDTH{1'b0}};

// Data registers load under these in the clocked process
reg store_input_to_output;
reg store_input_to_temp;
reg store_temp_to_output;

assign s_ready = s_ready_reg;
assign m_valid = m_valid_reg;
assign m_data = m_data_reg;

always @* begin
    m_valid_next = m_valid_reg;
    temp_valid_next = temp_valid_reg;
    store_input_to_output = 1'b0;
    store_input_to_temp = 1'b0;
    store_temp_to_output = 1'b0;

    if (s_ready_reg) begin
        if (m_ready || !m_valid_reg) begin
            m_valid_next = s_valid;
            store_input_to_output = s_valid;
        end else begin
            temp_valid_next = s_valid;
            store_input_to_temp = s_valid;
        end
    end else if (m_ready) begin
        m_valid_next = temp_valid_reg;
        store_temp_to_output = 1'b1;
        temp_valid_next = 1'b0;
    end

    // Ready next cycle if the temp register will be empty
    s_ready_next = !temp_valid_next;
end

always @(posedge clk) begin
    s_ready_reg <= s_ready_next;
    m_valid_reg <= m_valid_next;
    temp_valid_reg <= temp_valid_next;
    if (store_input_to_output) begin
        m_data_reg <= s_data;
    end else if (store_temp_to_output) begin
        m_data_reg <= temp_data_reg;
    end
    if (store_input_to_temp) begin
        temp_data_reg <= s_data;
    end

    if (rst) begin
        s_ready_reg <= 1'b0;
        m_valid_reg <= 1'b0;
        temp_valid_reg <= 1'b0;
    end
end

endmodule

`resetall
